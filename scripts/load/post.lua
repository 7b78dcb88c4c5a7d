-- post.lua - wrk script of make load: POSTs one file over and over.
--   wrk ... -s scripts/load/post.lua URL -- FILE CONTENT_TYPE [ACCEPT]
-- and prints one machine-readable line at the end:
--   RESULT requests=N duration_us=N non2xx=N errors=N p50_us=N p99_us=N
function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = args[2]
  wrk.headers["Accept"] = args[3] or args[2]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d non2xx=%d errors=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.duration, e.status,
    e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
