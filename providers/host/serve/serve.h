/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve: the host's half of the autoscaling loop
 * (docs/autoscaling.md, "The host side").
 *
 * Layers, one file each, the lower ones free of libvirt so the tests drive
 * them with a fake hypervisor:
 *   serve_gmsg.c     one line from a guest -> a typed struct gmsg (untrusted
 *                    input: bounded, never trusted for more than advice)
 *   serve_law.c      the control law: how much to grow or shrink a domain
 *                    now, and the fair share of the host budget (pure)
 *   serve_ctl.c      per domain: the channel session, the two-phase state
 *                    machine (plug -> grant -> applied; revoke -> offline ->
 *                    unplug), deadlines, backoff, reconciliation
 *   serve_journal.c  what was plugged and granted per domain, durable
 *   serve_report.c   status JSON, Prometheus text, JSON-lines events
 *   serve_config.c   the service's YAML (libyaml)
 *   serve_libvirt.c  the hypervisor interface on libvirt: virtio-mem, DIMM,
 *                    s390 standby ("already plugged")
 *   serve_tick.c     each tick: the phases' deadlines, status asked for,
 *                    the control law per idle domain, the budget shared
 *   serve_loop.c     cmd_serve(): libvirt's event loop, domains, streams
 * Times are CLOCK_MONOTONIC milliseconds passed in by the caller (the tests
 * pass their own clock).  Functions return 0 or -errno.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/wire/message.h"

#define SERVE_CONFIG_DEFAULT "/etc/memgrant/memgrant-host.yaml"
#define SERVE_NAME_MAX 128
#define SERVE_ID_PREFIX "mgs-" /* ids of the service's own grants and revocations */

/* ---- configuration (serve_config.c) ---------------------------------------------- */

enum hv_kind {
	HV_AUTO,       /* virtio-mem when the domain has one, else DIMM when it has slots */
	HV_VIRTIO_MEM,
	HV_DIMM,
	HV_STANDBY,    /* s390 standby memory: configured outside libvirt, always plugged */
};

/* Which control law decides (serve_law.c); the other two are the baselines
 * the libvirt test and bench/autoscale compare it with. */
enum serve_law {
	SERVE_LAW_MEMGRANT,       /* the guest's requests (its deficit) and offers, cooldowns, the floor */
	SERVE_LAW_MOM,            /* oVirt MoM-style: +-5 % of max per cooldown on MemAvailable's share */
	SERVE_LAW_NAIVE,          /* plug what is asked, take back what is offered, at once */
};

/* One domain's policy; every size in bytes, every time in ms. */
struct serve_policy {
	enum hv_kind hypervisor;
	enum serve_law law;
	uint64_t min, max;        /* granted memory kept within [min, max] */
	uint64_t step;            /* at most this much per grow */
	uint64_t shrink_step;     /* at most this much per shrink */
	uint64_t reserve;         /* never shrink below the guest's use plus this */
	uint64_t dimm_size;       /* DIMM backend: size of each DIMM attached */
	uint64_t standby;         /* standby backend: the standby memory the guest has */
	int64_t grow_cooldown, shrink_cooldown;
	int64_t slack_after;      /* slack must last this long before a shrink without offer */
	int64_t plug_deadline;    /* the device must reach its size by then */
	int64_t online_deadline;  /* plugged memory must be applied by the agent by then */
	int64_t unplug_deadline;
	int64_t revoke_backoff;   /* after a revocation the guest could not complete; doubles */
	int64_t revoke_backoff_max;
	int64_t query_interval;   /* how often the agent's status is asked */
	unsigned lines_per_s;     /* guest lines read per second (burst 4x) */
	const char *zone;         /* "movable", "normal", "auto" */
	const char *memmap;       /* "auto", "on", "off" */
};

struct serve_domain_cfg {
	char *name;
	struct serve_policy p;
	bool ignore;
};

/* How the service reaches a guest's channel org.memgrant.0. */
enum serve_channel {
	SERVE_CHANNEL_LIBVIRT,    /* virDomainOpenChannel (qemu:// and the like) */
	SERVE_CHANNEL_SOCKET,     /* the UNIX socket of the channel's <source mode='bind' path=...>,
				   * as QEMU's chardev server listens on it (connections that cannot
				   * open channels, such as libvirt's test:///FILE.xml driver) */
};

struct serve_config {
	char *connect;            /* libvirt URI, NULL: libvirt's default */
	enum serve_channel channel;
	char *state_dir;
	char *events;             /* JSON-lines events: a path, "-" stdout, NULL none */
	char *metrics_file;       /* Prometheus text, rewritten each interval */
	char *status_file;        /* what `memgrant-host status` reads */
	int64_t interval;         /* the control loop's tick */
	uint64_t host_reserve;    /* host memory kept free */
	uint64_t host_budget;     /* 0: free host memory minus host_reserve */
	bool dry_run;
	struct serve_policy defaults;
	struct serve_domain_cfg *domains;
	size_t n_domains;
};

void serve_policy_defaults(struct serve_policy *p);
/* Loads PATH (NULL or missing default path: built-in defaults). WHY: file:line: reason. */
int serve_config_load(const char *path, struct serve_config **out, char *why, size_t why_len);
void serve_config_free(struct serve_config *c);
/* The policy of DOMAIN (the defaults unless domains: names it); NULL when ignored. */
const struct serve_policy *serve_config_policy(const struct serve_config *c, const char *domain);
const char *hv_kind_name(enum hv_kind k);

/* ---- the hypervisor interface (serve_libvirt.c, and the tests' fake) --------------- */

struct hv_mem {
	enum hv_kind kind;        /* what backs this domain (never HV_AUTO) */
	uint64_t plugged;         /* bytes plugged now (virtio-mem <current>, DIMMs attached) */
	uint64_t requested;       /* bytes asked for (virtio-mem <requested>; DIMMs incl. pending) */
	uint64_t max;             /* most that can be plugged */
	uint64_t granule;         /* plug/unplug granularity (device block, DIMM size) */
	bool always_plugged;      /* standby: plug/unplug only move the account */
	bool busy;                /* an asynchronous unplug is under way (DIMM) */
};

enum hv_event_kind {
	HV_EV_SIZE,               /* the device's plugged size changed (coalesced: the last is final) */
	HV_EV_REMOVED,            /* a DIMM detach completed */
	HV_EV_REMOVAL_FAILED,     /* a DIMM detach was refused by the guest */
	HV_EV_GONE,               /* the domain stopped or disappeared */
	HV_EV_STARTED,            /* the domain (re)started: the guest's memory is fresh */
};

struct hv_event {
	enum hv_event_kind kind;
	uint64_t plugged;         /* HV_EV_SIZE: the new size */
};

/* A DIMM's place in the guest, for grants of exactly its blocks. */
struct hv_range {
	uint64_t start, size;
	char alias[64];
	char grant[MSG_ID_MAX + 1]; /* the service's bookkeeping: the grant that holds it now */
};

struct hv_ops {
	const char *name;
	int (*query)(void *impl, const char *dom, const struct serve_policy *p, struct hv_mem *out, char *why,
		     size_t why_len);
	/* Raises the plugged target by BYTES (a multiple of the granule); DIMM:
	 * fills OUT with the attached DIMM's range (may be NULL otherwise). */
	int (*plug)(void *impl, const char *dom, const struct serve_policy *p, uint64_t bytes, struct hv_range *out,
		    char *why, size_t why_len);
	/* Lowers the target by BYTES; DIMM: detaches RANGE (by alias). */
	int (*unplug)(void *impl, const char *dom, const struct serve_policy *p, uint64_t bytes,
		      const struct hv_range *range, char *why, size_t why_len);
	/* Free host memory in bytes (the budget's source). */
	int (*host_free)(void *impl, uint64_t *out);
};

/* ---- guest messages (serve_gmsg.c) -------------------------------------------------- */

enum gmsg_kind {
	GMSG_EMPTY,
	GMSG_BAD,                 /* unreadable: counted against the guest, never acted on */
	GMSG_SYNC,
	GMSG_STATUS,
	GMSG_REQUEST,
	GMSG_OFFER,
	GMSG_AGENT_STATUS,
	GMSG_ERROR,
	GMSG_OTHER,               /* a readable type the service does not use */
};

struct gmsg {
	enum gmsg_kind kind;
	uint64_t seq;             /* >0: from the agent's outbox, to acknowledge */
	char id[MSG_ID_MAX + 1];
	uint64_t generation;      /* status; sync: the agent's last channel generation */
	uint64_t nonce;           /* sync */
	enum msg_state state;     /* status */
	uint64_t requested, applied; /* status */
	uint64_t bytes;           /* request, offer */
	/* request (optional, docs/protocol.md): what the agent measured */
	uint64_t deficit, alloc_rate, mem_available_req;
	bool have_deficit;
	char code[16];            /* error */
	/* agent_status */
	uint64_t block_size, online, standby, granted, mem_total, mem_available;
	bool have_mem_available;
};

/* LINE (without its newline) into OUT.  Bad lines give GMSG_BAD and a reason
 * in WHY; never fails otherwise.  At most GMSG_LINE_MAX bytes are parsed. */
#define GMSG_LINE_MAX (4u << 20)
void gmsg_parse(const char *line, size_t len, struct gmsg *out, char *why, size_t why_len);

/* ---- the control law (serve_law.c) --------------------------------------------------- */

struct law_input {
	uint64_t granted;         /* memory the service granted and the agent applied */
	uint64_t block;           /* the guest's memory block size (dead band, rounding) */
	uint64_t request;         /* bytes the guest asked for since the last grow (0 none) */
	uint64_t offer;           /* bytes the guest offered (0 none) */
	uint64_t pending;         /* a grant given up on whose late report may still add this much */
	bool have_usage;          /* mem_total/mem_available known */
	uint64_t mem_total, mem_available;
	int64_t slack_since;      /* -1: no slack now; else when mem_available - reserve >= a block began */
	int64_t now;
	int64_t grow_ok_at, shrink_ok_at; /* cooldowns and backoff */
};

enum law_action { LAW_NONE, LAW_GROW, LAW_SHRINK };

struct law_out {
	enum law_action action;
	uint64_t bytes;
	bool refused_floor;       /* an offer or slack was cut (partly or wholly) by the floor */
	uint64_t floor_total;     /* used + reserve: the guest's memory is kept at or above this */
	char why[192];
};

void law_decide(const struct serve_policy *p, const struct law_input *in, struct law_out *out);
/*
 * Fair share: WANT[i] bytes asked by N domains, BUDGET bytes available,
 * GRANULE[i] each domain's rounding.  GIVE[i] <= WANT[i], multiples of
 * GRANULE[i], sum <= BUDGET; max-min fair (water-filling): no domain gets
 * more than another that wanted more and got less.
 */
void law_share(const uint64_t *want, const uint64_t *granule, size_t n, uint64_t budget, uint64_t *give);

/* ---- per-domain state (serve_ctl.c) ---------------------------------------------------- */

enum dom_phase {
	PH_IDLE,
	PH_PLUGGING,              /* asked the hypervisor for more; waiting for the device */
	PH_GRANTING,              /* grant sent; waiting for applied */
	PH_REVOKING,              /* revoke sent; waiting for the agent to offline */
	PH_UNPLUGGING,            /* blocks offline; waiting for the device to shrink */
};
const char *dom_phase_name(enum dom_phase ph);

/* What the journal keeps per domain (serve_journal.c). */
struct dom_record {
	uint64_t granted;         /* applied by the agent, by the service's grants */
	enum dom_phase phase;
	char op_id[MSG_ID_MAX + 1];
	uint64_t op_generation;
	uint64_t op_bytes;        /* the grant's or revocation's size */
	uint64_t target;          /* plugged target of the phase */
	struct hv_range ranges[32]; /* DIMM: the DIMMs the service attached and granted */
	size_t n_ranges;
	struct hv_range op_range; /* DIMM: the one being granted or revoked */
	bool op_has_range;
	bool take_back;           /* REVOKING: plugged memory the agent did not apply in time */
	char revoke_grant[MSG_ID_MAX + 1]; /* REVOKING by grant id (take-back, DIMM), else by size */
	/* What a restart must not forget (written with every record): the
	 * cooldowns and backoffs as CLOCK_MONOTONIC ms (a restart of the service
	 * keeps that clock; serve_ctl.c bounds them after a host reboot), and
	 * the counters. */
	int64_t grow_ok_at, shrink_ok_at, backoff, grow_backoff;
	struct serve_counts {
		uint64_t grows, shrinks, plugs, unplugs, requests, offers, refused_floor, failed_revokes,
			not_onlined;
	} counts;
	bool have_timing;         /* loaded: the journal had them (older journals do not) */
};

int serve_journal_load(const char *state_dir, const char *domain, struct dom_record *out, bool *found,
		       char *why, size_t why_len);
int serve_journal_store(const char *state_dir, const char *domain, const struct dom_record *r,
			char *why, size_t why_len);
int serve_journal_remove(const char *state_dir, const char *domain);

struct ctl_io {
	/* bytes to the guest's channel */
	int (*send)(void *ud, const char *domain, const char *buf, size_t len);
	/* an event object (serve_report.c writes it as a JSON line) */
	void (*event)(void *ud, json_t *ev);
	void (*log)(void *ud, int prio, const char *domain, const char *msg);
	void *ud;
};

struct ctl;

int ctl_new(const struct serve_config *cfg, const struct hv_ops *hv, void *hv_impl, const struct ctl_io *io,
	    struct ctl **out);
void ctl_free(struct ctl *c);
/* A running domain with the memgrant channel; loads its journal. */
int ctl_domain_add(struct ctl *c, const char *domain, int64_t now);
/* The domain stopped or vanished: its memory went with it. */
void ctl_domain_gone(struct ctl *c, const char *domain, int64_t now);
bool ctl_has_domain(const struct ctl *c, const char *domain);
/* The channel opened (sends a sync) or closed. */
void ctl_channel_up(struct ctl *c, const char *domain, int64_t now);
void ctl_channel_down(struct ctl *c, const char *domain, int64_t now);
/*
 * One line from the guest.  Returns 0, or -EAGAIN when the guest is over its
 * line budget for this second (the caller stops reading it until the next
 * tick; the line was dropped and counted).
 */
int ctl_guest_line(struct ctl *c, const char *domain, const char *line, size_t len, int64_t now);
/*
 * May the guest's channel be read again?  Lines already read in one chunk
 * past the budget are handled and put the guest in debt; it is not read
 * again until the debt is paid, so its lines per second stay within budget
 * however many fit in one read.
 */
bool ctl_may_read(struct ctl *c, const char *domain, int64_t now);
void ctl_hv_event(struct ctl *c, const char *domain, const struct hv_event *ev, int64_t now);
/* Deadlines, queries, the control law, the budget. */
void ctl_tick(struct ctl *c, int64_t now);
/* ms until the next thing ctl_tick() has to do (at most the interval). */
int64_t ctl_next_ms(const struct ctl *c, int64_t now);

/* Per-domain figures for status, metrics and the tests. */
struct dom_view {
	const char *name;
	enum dom_phase phase;
	enum hv_kind kind;
	bool connected, synced;
	uint64_t granted, plugged, requested;
	uint64_t plugged_unusable; /* plugged, not granted, past the online deadline */
	uint64_t request, offer;
	uint64_t mem_total, mem_available;
	uint64_t grows, shrinks, plugs, unplugs; /* completed operations */
	uint64_t refused_floor, failed_revokes, not_onlined, lines, lines_bad, lines_dropped, requests,
		requests_capped, offers;
	int64_t last_grow_ms;     /* request seen -> grant applied, of the last grow */
	int64_t last_shrink_ms;   /* shrink decided -> device shrunk */
	int64_t backoff_ms;
	const char *last_error;
};
size_t ctl_domains(const struct ctl *c);
int ctl_view(const struct ctl *c, size_t i, struct dom_view *out);

/* ---- reports (serve_report.c) ------------------------------------------------------------- */

/* The status object.  Counts of routine traffic (lines read) are in the
 * metrics alone: in the status they would change it at every query. */
json_t *serve_status_json(const struct ctl *c, const struct serve_config *cfg);
char *serve_metrics_text(const struct ctl *c);
void serve_print_status(FILE *f, json_t *status);

/* ---- view files (serve_views.c) ------------------------------------------------------------ */

/* A file that shows serve's state (status_file, metrics_file): rendered at
 * most once per SERVE_VIEW_MS or at once after an event, written only when
 * its text changed. */
#define SERVE_VIEW_MS 1000
struct serve_view {
	const char *path;   /* not owned */
	char *last;         /* the text written last */
	bool rendered;
	int64_t due;        /* the next rendering, monotonic ms */
	uint64_t writes;    /* files written */
};
/* Whether to render the view at NOW (then the next is SERVE_VIEW_MS on). */
bool serve_view_due(struct serve_view *v, int64_t now);
/* Due at once: an event was said, whose state the next rendering shows. */
void serve_view_soon(struct serve_view *v);
/* TEXT (taken; NULL: out of memory) replaces the file when it differs from
 * the text written last: 1 written, 0 the same, -errno (the next rendering
 * tries again). */
int serve_view_put(struct serve_view *v, char *text);
void serve_view_done(struct serve_view *v);

/* ---- the command (serve_loop.c) ------------------------------------------------------------ */

struct host_opts;
int cmd_serve(const struct host_opts *o, int argc, char **argv);
/* `memgrant-host status` without DOMAIN: the status file named by CONFIG (NULL: the default YAML). */
int serve_show_status(const char *config, const char *state_dir, bool json);
