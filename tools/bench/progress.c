/* progress.c - where a long run is: "[12/80] 34 s, ~1 min left: opencl
 * pthread-... count uniform 65536". On a terminal one line is rewritten in
 * place; into a file or pipe a line is written at most every 5 s, so logs
 * stay readable. stderr only: stdout carries the results. */
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

static struct {
    size_t total, done;
    int quiet, tty, open;
    double start, last;
} st;

void rbench_progress_init(size_t total, int quiet)
{
    st.total = total;
    st.done = 0;
    st.quiet = quiet;
    st.tty = isatty(STDERR_FILENO);
    st.open = 0;
    st.start = st.last = rbench_now();
}

void rbench_progress(const char *what)
{
    st.done++;
    if (st.quiet)
        return;
    double now = rbench_now(), used = now - st.start;
    if (!st.tty && now - st.last < 5.0 && st.done != 1)
        return;
    st.last = now;
    char eta[48] = "";
    if (st.done > 1 && st.total >= st.done) {
        double left = used / (double)(st.done - 1) *
                      (double)(st.total - st.done + 1);
        snprintf(eta, sizeof eta, ", ~%.0f s left", left);
    }
    if (st.tty)
        fprintf(stderr, "\r\033[K[%zu/%zu] %.0f s%s: %.80s", st.done, st.total,
                used, eta, what);
    else
        fprintf(stderr, "progress [%zu/%zu] %.0f s%s: %s\n", st.done,
                st.total, used, eta, what);
    st.open = st.tty;
    fflush(stderr);
}

void rbench_progress_done(void)
{
    if (st.open && !st.quiet) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    st.open = 0;
}

void rbench_progress_skip(size_t n)
{
    st.done += n;
}
