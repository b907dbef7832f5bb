/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host: the KVM host's end of the guest channel (docs/channel.md).
 *
 * Layers, one file each:
 *   host.c            main(): options, the subcommand table, exit codes
 *   host_cmds.c       grant, revoke, status, watch
 *   host_session.c    the line protocol over a transport: sync, send, receive,
 *                     acknowledge reports
 *   host_transport.c  bytes to and from the guest: a Unix socket (--socket) or
 *                     a libvirt stream from virDomainOpenChannel() driven by
 *                     libvirt's default event loop
 *   host_state.c      generations per domain under the state directory
 * Everything below host.c and host_cmds.c returns 0 or -errno and leaves a
 * human-readable reason in a caller's buffer; only the command layer prints.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/wire/lines.h"

#define HOST_CHANNEL_NAME "org.memgrant.0"
#define HOST_STATE_DIR_DEFAULT "/var/lib/memgrant-host"
#define HOST_LINE_MAX (4u << 20) /* agent's status lines can list many blocks */

/* Exit codes (also in docs/channel.md). */
enum {
	HOST_EXIT_OK = 0,
	HOST_EXIT_REFUSED = 1,    /* the agent refused, or the grant failed */
	HOST_EXIT_USAGE = 1,      /* usage errors exit 1, as in memgrantd and memgrantctl */
	HOST_EXIT_NO_ANSWER = 3,  /* the guest agent did not answer in time */
	HOST_EXIT_CONNECT = 4,    /* no such domain, not running, no channel, socket */
	HOST_EXIT_STATE = 5,      /* the state directory cannot be used */
	HOST_EXIT_PARTIAL = 64,   /* some blocks done (like chmem) */
};

struct host_opts {
	const char *uri;          /* -c */
	const char *socket_path;  /* --socket */
	const char *state_dir;
	bool state_dir_given;     /* --state-dir on the command line, not the default */
	int64_t timeout_ms;
	bool json;
};

/* ---- transport -------------------------------------------------------------- */

struct host_transport;

/* Deadlines are CLOCK_MONOTONIC milliseconds (((int64_t)mono_ms())), -1 for none. */

/* A Unix socket (the channel's <source mode='bind' path=.../>). */
int transport_open_socket(const char *path, struct host_transport **out, char *why, size_t why_len);
/*
 * libvirt: connects to URI (NULL: libvirt's default), looks the domain up,
 * checks it is running and that its XML has the channel HOST_CHANNEL_NAME,
 * then opens it.  Errors: -ENOENT no such domain, -ESRCH not running,
 * -ENODEV no channel (WHY then holds the XML to add), -ECONNREFUSED the
 * connection, -EOPNOTSUPP the driver cannot open channels, -EIO others.
 */
int transport_open_libvirt(const char *uri, const char *domain, struct host_transport **out, char *why,
			   size_t why_len);
/* Sends all of BUF. */
int transport_send(struct host_transport *t, const char *buf, size_t len, int64_t deadline);
/* >0 bytes read, 0 end of stream, -ETIMEDOUT, -errno. */
ssize_t transport_recv(struct host_transport *t, char *buf, size_t cap, int64_t deadline);
void transport_close(struct host_transport *t);

/* Does the domain XML define the channel HOST_CHANNEL_NAME? 1 yes, 0 no, -errno. */
int host_xml_has_channel(const char *xml);
/* The path of the channel's <source mode='bind' path=...> (a UNIX channel):
 * 1 found (OUT filled), 0 no such path, -ENAMETOOLONG, -EBADMSG. */
int host_xml_channel_path(const char *xml, char *out, size_t len);
/* The snippet for the domain XML (<devices>) that defines the channel. */
const char *host_channel_xml_snippet(void);

/* ---- session -------------------------------------------------------------------- */

struct host_session {
	struct host_transport *t;
	struct channel_reader rd;
	json_t *pending;          /* array: messages read, not yet handed out */
	bool syncing;
	uint64_t nonce;
	bool synced;
	uint64_t agent_generation; /* from the sync answer: last generation the agent saw */
	size_t skipped;            /* lines discarded while syncing or unreadable */
};

int session_init(struct host_session *s, struct host_transport *t);
void session_done(struct host_session *s);
/* Sends a sync with a random nonce and discards everything up to its answer. */
int session_sync(struct host_session *s, int64_t deadline);
int session_send(struct host_session *s, json_t *msg);
/* The next message from the agent (new reference), or -ETIMEDOUT / -EPIPE (closed). */
int session_next(struct host_session *s, int64_t deadline, json_t **msg);
/* Acknowledges MSG when it carries a "seq" (a report from the agent's outbox). */
int session_ack(struct host_session *s, json_t *msg);

/* ---- state ------------------------------------------------------------------------ */

/*
 * Reserves the next generation for DOMAIN: max(recorded, AGENT_LAST) + 1,
 * written durably before it is returned, so a generation is never used twice
 * even when the tool crashes after sending.  Serialized with flock() per domain.
 */
int host_state_next_generation(const char *state_dir, const char *domain, uint64_t agent_last, uint64_t *out,
			       char *why, size_t why_len);
/* STATE_DIR/<domain, escaped>EXT (new string in OUT). */
int host_state_path(const char *state_dir, const char *domain, const char *ext, char **out);
/* The last generation recorded for DOMAIN (0 none). */
int host_state_last_generation(const char *state_dir, const char *domain, uint64_t *out, char *why,
			       size_t why_len);

/* ---- commands --------------------------------------------------------------------- */

int cmd_grant(const struct host_opts *o, int argc, char **argv);
int cmd_revoke(const struct host_opts *o, int argc, char **argv);
int cmd_status(const struct host_opts *o, int argc, char **argv);
int cmd_watch(const struct host_opts *o, int argc, char **argv);
