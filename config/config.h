/* SPDX-License-Identifier: MIT */
/*
 * memgrant's configuration: /etc/memgrant/memgrant.yaml read with libyaml.
 *
 * Contract:
 * - config_load() parses a whole file into a fresh struct mg_config that
 *   starts from the compiled-in defaults, then validates it as a whole
 *   (cross-field checks) at the end.  It never prints and never touches the
 *   caller's current configuration: the caller swaps the new one in only when
 *   the load returned 0 (SIGHUP keeps the old one otherwise).
 * - Every problem found is collected in the caller's struct config_diag as
 *   "FILE:LINE:COLUMN: message" (1-based, from libyaml's marks); the loader
 *   does not stop at the first one.  On any problem it returns -EINVAL and
 *   *out stays NULL: nothing partial is ever handed out.  -ENOMEM and read
 *   errors (-ENOENT, -EACCES, ...) also come with one diag message.
 * - Unknown keys, duplicate keys, wrong types, bad sizes, durations and enum
 *   words, and YAML syntax errors are all errors.
 * - Optional sections (providers.https, providers.channel, backend.sim,
 *   pressure) are enabled by being present; `enabled`/`present` says so.
 * - Sizes are bytes, durations milliseconds; strings are malloc'd and owned
 *   by the struct (config_free() releases everything).
 *
 * docs/config.md describes every key.
 */
#pragma once

#include "hotplug/privsep/sandbox.h"
#include "hotplug/block.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#ifndef LOCALSTATEDIR
#define LOCALSTATEDIR "/var"
#endif
#ifndef RUNSTATEDIR
#define RUNSTATEDIR "/run"
#endif

#define MG_CONFIG_DEFAULT_PATH SYSCONFDIR "/memgrant/memgrant.yaml"
#define MG_CONFIG_MAX_BYTES (1024 * 1024) /* a config file larger than this is refused */

enum mg_backend_type {
	MG_BACKEND_SYSFS,
	MG_BACKEND_SIM,
};

enum mg_memmap_policy {
	MG_MEMMAP_AUTO,
	MG_MEMMAP_ALWAYS,
	MG_MEMMAP_NEVER,
};

/* zones: enum mem_zone, auto_online_blocks: enum mem_auto_online (hotplug/block.h) */

/* Values are the syslog priorities (LOG_ERR..LOG_DEBUG). */
enum mg_log_level {
	MG_LOG_ERROR = 3,
	MG_LOG_WARNING = 4,
	MG_LOG_NOTICE = 5,
	MG_LOG_INFO = 6,
	MG_LOG_DEBUG = 7,
};


struct mg_id_list {
	uint64_t *ids;
	size_t n;
};

struct mg_sim_config {
	bool present;                     /* backend.sim given */
	char *state;                      /* state file */
	uint64_t online;                  /* bytes online at boot */
	uint64_t standby;                 /* bytes of standby memory */
	uint64_t block_size;
	bool memmap_on_memory_supported;
	bool has_firmware;                /* false: no sys/firmware/memory (C0) */
	enum mem_auto_online auto_online_blocks;
	uint64_t used;                    /* memory the guest uses (MemAvailable) */
	char *tree;                       /* sysfs-shaped tree; NULL: "<state>.tree" */
	struct {
		struct mg_id_list configure_eio;
		struct mg_id_list offline_ebusy;
		uint64_t latency_ms;
	} faults;
};

/* enum mg_seccomp_action: hotplug/privsep/sandbox.h */

struct mg_agent_config {
	char *id;                 /* never NULL: configured, /etc/machine-id, or "unknown" */
	char *state_dir;
	char *api_socket;
	char *api_group;
	char *api_socket_mode;    /* octal string, checked: "0660" */
	uint64_t api_body_limit;  /* bytes */
	enum mg_log_level log_level;
	char *user;               /* the unprivileged process runs as this user (when started as root) */
	enum mg_seccomp_action seccomp; /* what a system call outside the filters does */
};

struct mg_backend_config {
	enum mg_backend_type type;
	char *root;               /* sysfs: where sys/ and proc/ are read */
	bool own_onlining;        /* set auto_online_blocks=offline at start, restore at exit */
	struct mg_sim_config sim;
};

struct mg_policy_config {
	enum mg_memmap_policy memmap_on_memory;
	uint64_t reserve;             /* bytes of MemAvailable auto keeps */
	enum mem_zone zone;
	unsigned movable_ratio;       /* percent MOVABLE:NORMAL that zone auto allows */
	uint64_t revoke_budget_ms;
	uint64_t block_op_timeout_ms; /* 0: no limit per block operation */
};

struct mg_https_config {
	bool enabled;             /* providers.https given */
	char *url;                /* base URL, never NULL when enabled */
	char *ca_file;            /* NULL: the system's CA store */
	char *cert_file;          /* client certificate (mTLS), NULL: none */
	char *key_file;           /* NULL: the key is in cert_file */
	char *token_file;         /* bearer token, NULL: none */
	uint64_t wait_ms;         /* long-poll wait, whole seconds */
	bool insecure_http;       /* allow an http:// url */
};

struct mg_channel_config {
	bool enabled;             /* providers.channel given */
	char *path;
};

struct mg_providers_config {
	struct mg_https_config https;
	struct mg_channel_config channel;
};

struct mg_hook {
	char **events;            /* "*", "grant.*", "grant.applied", ... */
	size_t n_events;
	char *exec;               /* program to run, or NULL */
	char *webhook;            /* URL to POST to, or NULL (exactly one is set) */
	char *secret_file;        /* webhook only: HMAC key, NULL: unsigned */
	bool insecure_http;       /* webhook only: allow http:// */
	uint64_t timeout_ms;
};

enum mg_psi_kind {
	MG_PSI_SOME,
	MG_PSI_FULL,
};

/* "some avg10>20": the memory PSI line, averaging window and threshold. */
struct mg_psi_trigger {
	bool set;
	enum mg_psi_kind kind;
	unsigned window_s;        /* 10, 60 or 300 */
	bool above;               /* '>' (true) or '<' (false) */
	unsigned threshold_centi; /* percent * 100: "20" -> 2000, "0.5" -> 50 */
};

struct mg_pressure_config {
	bool enabled;                       /* pressure given */
	struct mg_psi_trigger request_above; /* always set when enabled */
	struct mg_psi_trigger release_below; /* set: false means never release */
	uint64_t step;                      /* the unit of requests and offers (rounded to it) */
	uint64_t cooldown_ms;
	uint64_t plug_latency_ms;           /* request to memory online: the headroom's horizon */
	uint64_t interval_ms;               /* longest time between two MemAvailable readings */
};

struct mg_config {
	char *source;             /* the file (or name) it was loaded from */
	struct mg_agent_config agent;
	struct mg_backend_config backend;
	struct mg_policy_config policy;
	struct mg_providers_config providers;
	struct mg_hook *hooks;
	size_t n_hooks;
	struct mg_pressure_config pressure;
};

/* The messages of one load, in the order found. */
struct config_diag {
	char **msgs;
	size_t n;
};

/* Loads PATH.  OVERRIDES (may be NULL) is a NULL-terminated list of
 * "section.key=value" strings applied over the file before validation (a
 * scalar value only; "hooks" cannot be overridden).  Returns 0 and a fresh
 * config in *OUT, or -errno with *OUT NULL and the reasons in DIAG (which
 * may be NULL when the caller only wants the verdict). */
int config_load(const char *path, const char *const *overrides, struct mg_config **out,
		struct config_diag *diag);

/* config_load() with FLAGS.  CONFIG_CHECK_RUNTIME also reports what would
 * fail at run time (memgrantd --check-config): a CA, certificate, key, token
 * or webhook secret file that does not exist or cannot be read, a hook's
 * exec that is not an executable file, a channel path whose folder does not
 * exist. */
#define CONFIG_CHECK_RUNTIME 1u
int config_load_flags(const char *path, const char *const *overrides, unsigned flags,
		      struct mg_config **out, struct config_diag *diag);

/* The same from a buffer; NAME is used in messages in place of a file name. */
int config_load_buffer(const char *name, const char *buf, size_t len,
		       const char *const *overrides, struct mg_config **out,
		       struct config_diag *diag);

void config_free(struct mg_config *c);
static inline void config_freep(struct mg_config **c)
{
	config_free(*c);
}
#define _cleanup_config_ __attribute__((cleanup(config_freep)))

/* Empties DIAG (safe on a zeroed one; can be reused afterwards). */
void config_diag_clear(struct config_diag *d);
static inline void config_diag_clearp(struct config_diag *d)
{
	config_diag_clear(d);
}
#define _cleanup_config_diag_ __attribute__((cleanup(config_diag_clearp)))

/* The credential files CFG names (providers.https.ca_file, cert_file,
 * key_file, token_file, hooks[N].secret_file), added to OUT in that order
 * (lib/credstore.h).  0 or -ENOMEM. */
struct cred_store;
int config_credentials(const struct mg_config *cfg, struct cred_store *out);
/* The days left (negative: expired) until the certificate in PATH expires,
 * and the date in UNTIL.  -EINVAL when PATH holds no PEM certificate. */
int config_cert_days(const char *path, long *days, char *until, size_t len);

const char *mg_backend_type_name(enum mg_backend_type t);
const char *mg_memmap_policy_name(enum mg_memmap_policy p);
const char *mg_log_level_name(enum mg_log_level l);
const char *mg_seccomp_action_name(enum mg_seccomp_action a);
