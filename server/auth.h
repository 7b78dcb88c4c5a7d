/*
 * auth.h - bearer tokens of --auth-token-file (SPEC 11 "Access"): the
 * file is read at start and again on SIGHUP; the tokens stay in memory
 * only (zeroed when a table is dropped) and are never logged.
 *
 * The file: one token a line; blank lines and lines whose first
 * non-blank character is '#' are skipped; a trailing CR is dropped (CRLF
 * files). A token is 1 to RBD_TOKEN_MAX bytes of printable ASCII other
 * than space (0x21-0x7E). Anything else refuses the whole file with the
 * line number (the token itself is not repeated).
 *
 * Owners: every token has an owner id (>= 1) that scenes are stamped
 * with. A reload keeps the id of every token that is still in the file,
 * so their scenes stay theirs; a token that is gone loses its scenes
 * (they stay in the store, reachable by no one, until a restart); a new
 * token gets a new id, also when it is an old token come back.
 *
 * Timing: auth_check's time does not depend on the token given, on which
 * token matched or on where the first differing byte is: every slot of
 * the table is compared over all RBD_TOKEN_MAX bytes, and the table has
 * max(16, the next power of two) slots, so the time also tells the
 * number of tokens only to within a factor of two.
 *
 * Threads: auth_check from any thread, auth_reload from one at a time
 * (a rwlock lets checks run meanwhile, each on one whole table).
 */
#ifndef RBD_AUTH_H
#define RBD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define RBD_TOKEN_MAX 256
/* The SHA-256 of a token: what --data-dir keeps of a scene's owner. */
#define RBD_OWNER_KEY_BYTES 32

typedef struct rbd_auth rbd_auth;

/* Reads path. Returns the table, or NULL with a one-line reason in why
 * (unreadable file, no token, a bad line, out of memory). */
rbd_auth *auth_load(const char *path, char *why, size_t why_len);

/* Reads the path given to auth_load again and swaps the table in.
 * Returns the number of tokens, or -1 with why (the old table stays). */
int auth_reload(rbd_auth *a, char *why, size_t why_len);

/* The owner id of the token in an Authorization header value
 * ("Bearer <token>", the scheme case-insensitive, spaces around the
 * token allowed), or 0 when the header is NULL, not Bearer, or names no
 * token of the table. */
uint64_t auth_check(rbd_auth *a, const char *authorization);

/* The key (RBD_OWNER_KEY_BYTES) of owner's token: 0, or -1 when no token
 * of the current table has that owner. */
int auth_owner_key(rbd_auth *a, uint64_t owner, uint8_t *key);

/* The owner of the token whose key this is, 0 when no token of the
 * current table has it. */
uint64_t auth_owner_of_key(rbd_auth *a, const uint8_t *key);

/* Tokens in the current table. */
unsigned auth_count(rbd_auth *a);

/* Zeroes and frees; NULL is ignored. */
void auth_destroy(rbd_auth *a);

#endif
