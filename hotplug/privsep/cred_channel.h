/* SPDX-License-Identifier: MIT */
/*
 * Credential files the agent may not read itself, handed to it by the
 * privileged helper (docs/security.md, "Credentials").
 *
 * memgrantd, still root, fixes at start the list of credential files the
 * configuration names (providers.https.ca_file, cert_file, key_file,
 * token_file, each webhook's secret_file) and gives it to the helper on its
 * command line.  The agent asks for one of them by its index in that list,
 * never by name, over a socketpair of its own (the credential channel, fd 5
 * of the helper), and gets an O_RDONLY descriptor of the file by SCM_RIGHTS:
 *
 *   request (8 bytes)  magic index
 *   reply   (8 bytes)  magic err   plus, when err is 0, one descriptor
 *
 * The helper opens the path as root without capabilities (so root must own
 * a root-only file), refuses what is not a regular file of at most
 * PH_CRED_FILE_MAX bytes, and answers EPERM for an index it does not serve.
 * A malformed request (size, magic, an index past the list, ancillary data)
 * ends the helper, as on the block channel (serve.h).  The agent thus reads
 * exactly the files root named at start: a reload that names other files
 * needs a restart.
 *
 * A file is served only when the agent's user cannot change what the path
 * leads to: no folder on it (as written and as resolved at start) may be
 * owned by that user, or writable by it (a sticky folder counts when the
 * next component is missing or the user's).  ph_cred_path_safe() decides;
 * the agent reads a file in a folder it controls itself, as before.  Every
 * open is made by ph_cred_open_walk(), which checks the folders again, links
 * included, at that moment.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PH_CRED_MAGIC 0x4d474352u /* "MGCR" */
#define PH_CRED_MAX 32            /* files in the list, at most (a bit each in a uint32_t) */
#define PH_CRED_FILE_MAX (1u << 20)
#define PH_CRED_FD 5              /* the helper's end of the credential channel */

struct ph_cred_request {
	uint32_t magic;
	uint32_t index;
};
_Static_assert(sizeof(struct ph_cred_request) == 8, "the credential request is 8 bytes on every ABI");

/* The helper: answers one request on FD from PATHS (N entries; NULL: not
 * served).  1 when answered, 0 when the agent closed the channel, -EPROTO
 * for a malformed request, -errno for a broken socket; WHY says which.
 * SAID (NULL: never) holds a bit per file whose refusal by the walk was
 * reported: the first refusal of a file answers 1 with WHY naming the
 * folder, its owner and mode, for the caller to log once; else WHY is "". */
int ph_cred_answer(int fd, const char *const *paths, size_t n, uint32_t *said, char *why, size_t whylen);

/* Opens PATH read-only as this process's user resolves it, one component at
 * a time with each link followed by hand: a name is looked up only in a
 * folder no other user can change (this user's and not writable by group or
 * others, or sticky with the name already this user's), so that a link the
 * agent plants, or a folder it can write, never leads root to a file it
 * chooses.  This check is made at every open, not once at start.  0 with
 * *OUT, or a negative errno (-EACCES: a folder another user may change, WHY
 * says which). */
int ph_cred_open_walk(const char *path, int *out, char *why, size_t whylen);
/* The same walk for any path root opens on the agent's behalf (the sim's
 * file, the state folder): the last component is opened with FLAGS
 * (O_PATH, O_RDONLY | O_DIRECTORY ...), never through a link of its own. */
int ph_open_walk(const char *path, int flags, int *out, char *why, size_t whylen);

/* The agent's end (thread-safe: one request at a time). */
struct ph_cred_client {
	int fd;
	pthread_mutex_t lock;
};
void ph_cred_client_init(struct ph_cred_client *c, int fd); /* owns FD */
void ph_cred_client_done(struct ph_cred_client *c);
/* *OUT: a read-only descriptor of file INDEX; -EPIPE when the helper is
 * gone, else the helper's errno (-ENOENT, -EACCES, -EPERM not served ...). */
int ph_cred_fetch(struct ph_cred_client *c, unsigned index, int *out);

/* Whether UID (with GROUPS) cannot change what PATH leads to (see above).
 * False with WHY naming the folder.  UID 0 is always safe. */
bool ph_cred_path_safe(const char *path, uid_t uid, const gid_t *groups, size_t n_groups, char *why, size_t whylen);
