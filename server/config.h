/*
 * config.h - rayboxd's options: ONE table (name, environment variable,
 * default, bounds, help) that the command line, the environment,
 * `--help` and the markdown table of docs/http.md all come from.
 *
 * Precedence: default < environment (RAYBOX_*) < command line.
 * Values: text, unsigned integers (byte sizes take a K, M or G suffix,
 * binary), booleans (1/0, true/false, yes/no, on/off; a bare flag is
 * true), and the backend name.
 */
#ifndef RBD_CONFIG_H
#define RBD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* X(field, flag, env, type, default, min, max, help) */
#define RBD_OPTIONS(X)                                                         \
    X(bind, "bind", "RAYBOX_BIND", STR, "127.0.0.1", 0, 0,                     \
      "address to listen on: an IPv4 or IPv6 literal, or localhost "           \
      "(127.0.0.1)")                                                           \
    X(port, "port", "RAYBOX_PORT", U64, "8080", 0, 65535,                      \
      "TCP port; 0 picks a free one (the \"listening\" log line names it)")            \
    X(auth_token_file, "auth-token-file", "RAYBOX_AUTH_TOKEN_FILE", STR, "",  \
      0, 0, "file of bearer tokens, one a line (# comments); then every "     \
      "route but /v1/health needs Authorization: Bearer TOKEN (else 401) "    \
      "and scenes belong to the token that made them; read at start and on " \
      "SIGHUP")                                                                \
    X(metrics_public, "metrics-public", "RAYBOX_METRICS_PUBLIC", BOOL, "0", 0, \
      1, "with --auth-token-file, GET /metrics without a token")              \
    X(tls_cert, "tls-cert", "RAYBOX_TLS_CERT", STR, "", 0, 0,                  \
      "PEM certificate chain: serve HTTPS only (with --tls-key)")              \
    X(tls_key, "tls-key", "RAYBOX_TLS_KEY", STR, "", 0, 0,                     \
      "PEM private key of --tls-cert (unencrypted)")                           \
    X(allowed_hosts, "allowed-hosts", "RAYBOX_ALLOWED_HOSTS", STR, "", 0, 0,   \
      "Host names a request may carry, comma-separated, port optional, * = "  \
      "any (else 421); empty: localhost, 127.0.0.1 and ::1 when bound to "    \
      "loopback, else any")                                                    \
    X(insecure, "insecure", "RAYBOX_INSECURE", BOOL, "0", 0, 1,                \
      "allow --bind to a non-loopback address without --auth-token-file")     \
    X(backend, "backend", "RAYBOX_BACKEND", BACKEND, "auto", 0, 0,             \
      "auto (an OpenCL GPU if any, else cpu), cpu or opencl")                  \
    X(device, "device", "RAYBOX_DEVICE", STR, "", 0, 0,                        \
      "OpenCL device: index in GET /v1/devices or part of its name; "          \
      "empty lets the backend choose")                                         \
    X(devices, "devices", "RAYBOX_DEVICES", STR, "", 0, 0,                     \
      "OpenCL devices to split every batch over, in proportion to their "    \
      "measured speed: all, or indices in GET /v1/devices, comma-separated; " \
      "empty: one device (--device)")                                          \
    X(workers, "workers", "RAYBOX_WORKERS", U64, "0", 0, 256,                  \
      "query worker threads, each owning one backend context; 0 = one per "    \
      "online CPU")                                                            \
    X(threads, "threads", "RAYBOX_THREADS", U64, "0", 0, 1024,                 \
      "CPU backend threads of each worker for large queries (small ones run "  \
      "on the worker itself); 0 = online CPUs")                                \
    X(io_threads, "io-threads", "RAYBOX_IO_THREADS", U64, "2", 1, 64,          \
      "HTTP I/O threads (libmicrohttpd thread pool)")                          \
    X(poll, "poll", "RAYBOX_POLL", BOOL, "0", 0, 1,                            \
      "I/O threads wait in poll(2) instead of epoll: no epoll_ctl on every "   \
      "suspend and resume of a query handed to a worker (10-15% more such "    \
      "small requests a second with a few busy connections), but each wait "  \
      "scans all of a thread's connections, so keep epoll for many")          \
    X(queue_depth, "queue-depth", "RAYBOX_QUEUE_DEPTH", U64, "256", 1,         \
      1048576, "requests that may wait for a worker; beyond, 503 at once")     \
    X(retry_after, "retry-after", "RAYBOX_RETRY_AFTER", U64, "1", 0, 3600,     \
      "Retry-After seconds sent with a 503")                                   \
    X(max_body_bytes, "max-body-bytes", "RAYBOX_MAX_BODY_BYTES", U64, "256M",  \
      64, 1ull << 40, "largest request body (413 beyond, from Content-Length " \
      "before the body is read)")                                              \
    X(max_rays, "max-rays", "RAYBOX_MAX_RAYS", U64, "4194304", 1, 2147483647,  \
      "rays per request")                                                      \
    X(max_boxes, "max-boxes", "RAYBOX_MAX_BOXES", U64, "1048576", 1,           \
      2147483647, "boxes per request, scene creation or PATCH")                \
    X(max_results, "max-results", "RAYBOX_MAX_RESULTS", U64, "16777216", 1,    \
      1ull << 40, "`all` mode: rays x max_hits per request")                   \
    X(default_max_hits, "default-max-hits", "RAYBOX_DEFAULT_MAX_HITS", U64,    \
      "64", 1, 4294967295u, "`all` mode: max_hits of requests that omit it")   \
    X(max_observers, "max-observers", "RAYBOX_MAX_OBSERVERS", U64, "1048576", \
      1, 2147483647, "visibility: observers per request")                    \
    X(max_targets, "max-targets", "RAYBOX_MAX_TARGETS", U64, "1048576", 1,    \
      2147483647, "visibility: targets per request")                          \
    X(max_visibility_bytes, "max-visibility-bytes",                           \
      "RAYBOX_MAX_VISIBILITY_BYTES", U64, "256M", 1, 1ull << 40,              \
      "visibility: the answer's bit matrix, observers x ceil(targets / 8) "   \
      "bytes (413 beyond, before any work); JSON answers also keep "          \
      "observers x targets within --max-results")                             \
    X(max_scenes, "max-scenes", "RAYBOX_MAX_SCENES", U64, "1024", 0, 1u << 30, \
      "stored scenes (507 beyond)")                                            \
    X(max_scene_bytes, "max-scene-bytes", "RAYBOX_MAX_SCENE_BYTES", U64, "1G", \
      0, 1ull << 44, "memory of all stored scenes together (507 beyond)")      \
    X(data_dir, "data-dir", "RAYBOX_DATA_DIR", STR, "", 0, 0,                  \
      "directory that keeps the stored scenes: every change is on disk "     \
      "(fsync) before it is answered, and they are restored at start; "      \
      "empty: scenes live in memory only")                                    \
    X(data_merge_bytes, "data-merge-bytes", "RAYBOX_DATA_MERGE_BYTES", U64,    \
      "1M", 0, 1ull << 40, "--data-dir: a scene's change log is merged into " \
      "a new snapshot of it once the log is larger than both this and the "   \
      "snapshot")                                                              \
    X(max_memory, "max-memory", "RAYBOX_MAX_MEMORY", U64, "0", 0, 1ull << 44, \
      "memory that request bodies being parsed, answers not yet sent and "   \
      "scene versions replaced while queries still read them may hold "      \
      "together; a request beyond it is answered 503 before it allocates; "  \
      "0 = half of the machine's memory (or of the cgroup's limit)")          \
    X(max_connections, "max-connections", "RAYBOX_MAX_CONNECTIONS", U64,       \
      "1000", 1, 1000000, "open connections, suspended ones included; one "   \
      "more is answered 503 and closed at once")                               \
    X(max_connections_per_address, "max-connections-per-address",             \
      "RAYBOX_MAX_CONNECTIONS_PER_ADDRESS", U64, "256", 0, 1000000,            \
      "open connections from one client address (IPv4, or IPv6 whole); one "   \
      "more is answered 503 and closed at once; 0 = no limit")                 \
    X(connection_timeout, "connection-timeout",                                \
      "RAYBOX_CONNECTION_TIMEOUT", U64, "30", 1, 86400,                        \
      "seconds a connection may stay idle while a request is read or "        \
      "answered (libmicrohttpd's default, 0, never closes one); between "      \
      "requests --header-timeout applies")                                                     \
    X(header_timeout, "header-timeout", "RAYBOX_HEADER_TIMEOUT", U64, "10", 1, \
      3600, "seconds a client has to send a request's headers, from the "     \
      "connection's start or the end of the previous request (so also the "   \
      "longest an idle keep-alive connection is kept), however slowly the "    \
      "bytes come; then 408 and closed")                                       \
    X(min_body_rate, "min-body-rate", "RAYBOX_MIN_BODY_RATE", U64, "1024", 0,  \
      1ull << 30, "bytes a second a request body must keep up: it may take "   \
      "--header-timeout seconds plus 1 s for every N bytes received; then "    \
      "408 and closed; 0 = no limit (only --connection-timeout)")              \
    X(connection_memory, "connection-memory", "RAYBOX_CONNECTION_MEMORY",      \
      U64, "32K", 8192, 64ull << 20,                                           \
      "per-connection memory pool: headers and the read buffer (the size of "  \
      "the body pieces handed to the parser); libmicrohttpd clears it after "  \
      "every request, so larger costs small requests time")                    \
    X(buffer_cache, "buffer-cache", "RAYBOX_BUFFER_CACHE", U64, "256M", 0,     \
      1ull << 40, "memory kept after large requests (arrays of 1 MiB and "     \
      "more: binary rays and boxes, answers) for the next ones, which then "   \
      "skip the page faults of fresh memory; 0 = keep none")                   \
    X(max_query_ms, "max-query-ms", "RAYBOX_MAX_QUERY_MS", U64, "60000", 0,    \
      86400000, "milliseconds a query may run on a worker before it is "       \
      "stopped and answered 503 (checked between pieces of a few hundred "     \
      "rays; OpenCL: between launches); 0 = no limit")                         \
    X(query_estimate_margin, "query-estimate-margin",                         \
      "RAYBOX_QUERY_ESTIMATE_MARGIN", U64, "2", 0, 1000,                      \
      "CPU backend: a query large enough to spread over the threads first "   \
      "runs 64 of its rays; when that trial's time x rays / 64 / --threads "  \
      "is over N x --max-query-ms it is answered 413 with the estimate, "    \
      "without running; 0 = no trial")                                        \
    X(inline_max_tests, "inline-max-tests", "RAYBOX_INLINE_MAX_TESTS", U64,  \
      "65536", 0, 262143, "CPU backend: a query of at most N ray-element "    \
      "tests (rays x elements, or rays when more; pairs: rays) that is not "  \
      "merged is answered on the I/O thread that read it, with a context of " \
      "its own, instead of being handed to a worker and back; larger ones "   \
      "always go to the workers; 0 = every query goes to a worker")           \
    X(bvh_build, "bvh-build", "RAYBOX_BVH_BUILD", STR, "sah", 0, 0,           \
      "how scene hierarchies are built: sah (binned surface area "           \
      "heuristic, the faster queries) or fast (along a Morton curve: "       \
      "builds and appends 1.8-5.5x faster, queries a few percent slower; "   \
      "for scenes rebuilt often); answers are the same")                      \
    X(merge, "merge", "RAYBOX_MERGE", STR, "auto", 0, 0,                       \
      "on, off or auto (on for OpenCL, off for the CPU backend): small "      \
      "queries queued on the same scene version, mode and outputs run as "    \
      "one backend call")                                                      \
    X(merge_max_rays, "merge-max-rays", "RAYBOX_MERGE_MAX_RAYS", U64, "4096",  \
      1, 1048576, "--merge: rays of one merged call; a query of more rays "   \
      "is never merged")                                                       \
    X(merge_wait_us, "merge-wait-us", "RAYBOX_MERGE_WAIT_US", U64, "200", 0,   \
      100000, "--merge: microseconds a worker waits for more queries to "     \
      "merge, while they come less than this apart and waits have been "      \
      "gathering some; 0 = merge only what is queued")                        \
    X(drain_timeout, "drain-timeout", "RAYBOX_DRAIN_TIMEOUT", U64, "20", 0,    \
      3600, "seconds SIGTERM/SIGINT waits for open connections before "        \
      "closing them")                                                          \
    X(quiet, "quiet", "RAYBOX_QUIET", BOOL, "0", 0, 1,                         \
      "no per-request log lines (startup, shutdown and errors still)")

#define RBD_FIELD_STR(f) char f[256];
#define RBD_FIELD_BACKEND(f) char f[16];
#define RBD_FIELD_U64(f) uint64_t f;
#define RBD_FIELD_BOOL(f) int f;

typedef struct rbd_config {
#define RBD_X(f, flag, env, type, def, lo, hi, help) RBD_FIELD_##type(f)
    RBD_OPTIONS(RBD_X)
#undef RBD_X
} rbd_config;

/* Defaults only. */
void rbd_config_defaults(rbd_config *c);

/* Defaults, then the environment, then argv[1..]. Returns 0 when the
 * server should run, 1 when it printed --help, --help-markdown or
 * --version to out (exit 0), -1 on a bad value or option (a one-line
 * message in err). */
int rbd_config_load(rbd_config *c, int argc, char **argv, FILE *out,
                    char *err, size_t err_len);

/* The usage text and the markdown table, from the table. */
void rbd_config_help(FILE *out);
void rbd_config_markdown(FILE *out);

#endif
