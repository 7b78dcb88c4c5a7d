/* test_conn_gate.c - server/conn_gate.c: the total and per-address counts
 * against a plain model, through many addresses coming and going (the
 * table's deletions move entries, which must stay findable), IPv4 and its
 * IPv4-mapped IPv6 spelling as one client, and the refusal counters. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "conn_gate.h"
#include "testutil.h"

static struct sockaddr_in v4(uint32_t host)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(host)};
    return a;
}

#define ENTER(g, a) conn_gate_enter(g, (struct sockaddr *)&(a), sizeof(a))
#define LEAVE(g, a) conn_gate_leave(g, (struct sockaddr *)&(a), sizeof(a))

START_TEST(test_total_limit)
{
    rbd_conn_gate *g = conn_gate_create(3, 0);
    struct sockaddr_in a = v4(0x7f000001);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ENTER(g, a), RBD_GATE_ADMIT);
    ck_assert_int_eq(ENTER(g, a), RBD_GATE_FULL);
    ck_assert_uint_eq(conn_gate_open(g), 3);
    LEAVE(g, a);
    ck_assert_int_eq(ENTER(g, a), RBD_GATE_ADMIT);
    /* No address at all (a Unix socket): counted in the total only. */
    LEAVE(g, a);
    ck_assert_int_eq(conn_gate_enter(g, NULL, 0), RBD_GATE_ADMIT);
    uint64_t full, addr;
    conn_gate_refused(g, &full, &addr);
    ck_assert_uint_eq(full, 1);
    ck_assert_uint_eq(addr, 0);
    conn_gate_destroy(g);
    conn_gate_destroy(NULL);
}
END_TEST

START_TEST(test_mapped_address_is_one_client)
{
    rbd_conn_gate *g = conn_gate_create(100, 2);
    struct sockaddr_in a = v4(0x0a000001);
    struct sockaddr_in6 m = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:10.0.0.1", &m.sin6_addr);
    struct sockaddr_in6 other = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "2001:db8::1", &other.sin6_addr);
    ck_assert_int_eq(ENTER(g, a), RBD_GATE_ADMIT);
    ck_assert_int_eq(ENTER(g, m), RBD_GATE_ADMIT);
    ck_assert_int_eq(ENTER(g, a), RBD_GATE_ADDRESS_FULL);
    ck_assert_int_eq(ENTER(g, m), RBD_GATE_ADDRESS_FULL);
    ck_assert_int_eq(ENTER(g, other), RBD_GATE_ADMIT);
    LEAVE(g, m);
    ck_assert_int_eq(ENTER(g, a), RBD_GATE_ADMIT);
    uint64_t full, addr;
    conn_gate_refused(g, &full, &addr);
    ck_assert_uint_eq(full, 0);
    ck_assert_uint_eq(addr, 2);
    conn_gate_destroy(g);
}
END_TEST

/* Random enters and leaves over 300 addresses at a table of 1024 slots
 * nearly a third full, against per-address counts kept in an array. */
START_TEST(test_against_model)
{
    enum { ADDRS = 300, LIMIT = 320, PER = 3, STEPS = 200000 };
    rbd_conn_gate *g = conn_gate_create(LIMIT, PER);
    unsigned model[ADDRS] = {0}, open = 0;
    rbt_rng rng = {7};
    for (int step = 0; step < STEPS; step++) {
        unsigned k = rbt_below(&rng, ADDRS);
        /* Addresses that collide in few bits, as a /24 does. */
        struct sockaddr_in a = v4(0xc0a80000u + k * 256u);
        if (rbt_below(&rng, 2) && model[k]) {
            LEAVE(g, a);
            model[k]--;
            open--;
        } else {
            rbd_gate_verdict want = open >= LIMIT    ? RBD_GATE_FULL
                                    : model[k] >= PER ? RBD_GATE_ADDRESS_FULL
                                                      : RBD_GATE_ADMIT;
            ck_assert_int_eq(ENTER(g, a), want);
            if (want == RBD_GATE_ADMIT)
                model[k]++, open++;
        }
        ck_assert_uint_eq(conn_gate_open(g), open);
    }
    /* Everything given back: every address admits PER again. */
    for (unsigned k = 0; k < ADDRS; k++) {
        struct sockaddr_in a = v4(0xc0a80000u + k * 256u);
        while (model[k]--)
            LEAVE(g, a);
    }
    ck_assert_uint_eq(conn_gate_open(g), 0);
    conn_gate_destroy(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn_gate");
    TCase *tc = tcase_create("conn_gate");
    tcase_add_test(tc, test_total_limit);
    tcase_add_test(tc, test_mapped_address_is_one_client);
    tcase_add_test(tc, test_against_model);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
