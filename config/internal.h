/* SPDX-License-Identifier: MIT */
/*
 * The inside of config/: what its files share, not an API for anyone else.
 *   keys.c      the key tables (type, default, range, place of every key) and
 *               the names of the enumerations
 *   convert.c   one scalar into its C value; defaults; freeing by the tables
 *   load.c      libyaml's document walked by the tables, overrides, messages
 *               with line and column, config_load() and config_load_buffer()
 *   validate.c  the checks that need several keys (cfg_finish())
 *   check.c     what would fail at run time (--check-config: files, hooks,
 *               the channel's folder)
 *   check_agent.c  the same as the running agent meets it: agent.user and
 *               api_group, and the files the agent opens, tried as the agent
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <yaml.h>

#include "config/config.h"

#define MAX_DIAG 100 /* after this many messages, one more says so and the rest are dropped */
#define MACHINE_ID_PATH "/etc/machine-id"


enum kind {
	K_STR,      /* any string (check() may narrow it) */
	K_PATH,     /* an absolute path */
	K_BOOL,
	K_SIZE,     /* uint64_t bytes, size_parse() */
	K_DURATION, /* uint64_t milliseconds, duration_parse_ms() */
	K_UINT,     /* unsigned, decimal */
	K_MS,       /* uint64_t, a plain number of milliseconds */
	K_ENUM,     /* int: index in choices + choice_base */
	K_PSI,      /* struct mg_psi_trigger */
	K_IDS,      /* struct mg_id_list */
	K_STRLIST,  /* char **, count at count_off */
	K_SECTION,  /* a mapping described by sub */
	K_HOOKS,    /* the hooks list */
};

struct key_def {
	const char *name;
	enum kind kind;
	size_t off;
	const char *dflt;            /* converted like a YAML value; NULL: none */
	bool required;
	uint64_t min, max;           /* max 0: no upper limit */
	const char *const *choices;  /* K_ENUM */
	int (*alias)(const char *s); /* K_ENUM: other spellings (hotplug/words.h), index or -1 */
	int choice_base;
	char psi_op;                 /* K_PSI: the comparison the key's name implies */
	const struct key_def *sub;   /* K_SECTION, K_HOOKS */
	bool has_present;            /* K_SECTION: set the bool at present_off when given */
	size_t present_off;
	size_t count_off;            /* K_STRLIST */
	bool (*check)(const char *s, char *why, size_t len);
};

#define CFG(f) offsetof(struct mg_config, f)
#define HOOK(f) offsetof(struct mg_hook, f)
#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define SEC 1000ULL
#define HOUR (3600 * SEC)

/* The root of the key tables (keys.c). */
extern const struct key_def cfg_root_keys[];

struct seen {
	char *path;
	int key;   /* node of the key, 0 for sequence items */
	int value; /* node of the value */
};

struct pending {
	size_t line, col; /* 0, 0: no position */
	size_t seq;       /* order found, for a stable sort */
	char *msg;
};

struct ctx {
	const char *name;
	const char *buf;
	size_t len;
	yaml_document_t doc;
	bool have_doc;
	struct config_diag *diag;
	struct pending *pend;
	size_t n_pend;
	size_t n_errors;
	bool oom;
	struct seen *seen;
	size_t n_seen;
	/* nodes made for overrides: node index -> override text */
	int first_override_node;
	const char **override_of; /* indexed by node - first_override_node */
	size_t n_override_of;
	/* nodes that already have a message: the whole-config checks stay
	 * quiet about them rather than repeat a problem in other words */
	int *bad;
	size_t n_bad;
	bool in_finish;
	unsigned flags; /* CONFIG_CHECK_RUNTIME */
};

/* convert.c */
int cfg_parse_u64(const char *s, uint64_t *out);
void cfg_list_choices(const char *const *choices, char *buf, size_t len);
int cfg_convert(const struct key_def *d, const char *s, void *base, char *why, size_t len);
int cfg_apply_defaults(const struct key_def *defs, void *base);
void cfg_free_keys(const struct key_def *defs, void *base);
void cfg_free_strlist(char **v, size_t n);

/* keys.c */
bool cfg_check_agent_id(const char *s, char *why, size_t len);

/* load.c: messages at a node, and what the walk saw */
yaml_node_t *cfg_node(struct ctx *c, int idx);
bool cfg_is_null(const yaml_node_t *n);
void cfg_err_at(struct ctx *c, int idx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const struct seen *cfg_seen_get(struct ctx *c, const char *path);
int cfg_where(struct ctx *c, const char *path);   /* the value's node, 0: not given */
int cfg_where_key(struct ctx *c, const char *path);
bool cfg_bad(struct ctx *c, const char *path);    /* already has a message */

/* validate.c: the checks that need several keys */
void cfg_finish(struct ctx *c, struct mg_config *cfg);
bool cfg_url_scheme_is(const char *url, const char *scheme);

/* check.c: what would fail at run time (files, hooks, folders) */
void cfg_check_runtime(struct ctx *c, const struct mg_config *cfg);

/* check_agent.c: who the running agent is (agent.user, api_group: a missing
 * user or group, or a user outside the group, is reported at its key) and
 * what it may open. */
struct agent_view {
	bool known;          /* false: agent.user does not exist (reported) */
	bool other;          /* root starting an agent of another uid */
	uid_t uid;
	gid_t gid;
	gid_t groups[2];     /* its primary group and the API group, as sandbox_drop() gives them */
	size_t n_groups;
	const char *user;
};
void cfg_agent_view(struct ctx *c, const struct mg_config *cfg, struct agent_view *v);
/* access(PATH, MODE) as the agent (in a child that takes its identity when
 * root starts it as another user): 0, a positive errno, or a negative one
 * when the identity could not be taken.  Only before threads start. */
int cfg_agent_access(const struct agent_view *v, const char *path, int mode);
/* The files the agent opens (see check_agent.c), tried as the agent. */
void cfg_check_agent(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v);
/* The sim's folders against the helper and the agent (check_sim.c). */
void cfg_check_sim(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v);
/* check_creds.c: the credential files, as the agent will get them. */
void cfg_check_credentials(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v);
