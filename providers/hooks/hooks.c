/* SPDX-License-Identifier: MIT */
/*
 * Hooks, the event side: the engine's typed transitions and hooks_fire()'s
 * events wait in one list, in the order they came; the runner thread
 * (exec.c) takes them from it, builds each event (fire_now()), queues one
 * job per matching exec hook (exec.c runs them) and puts it in the outbox
 * of each matching webhook (webhook.c delivers them).
 */
#include "providers/hooks/hooks_impl.h"

#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "agent/engine/engine.h"
#include "lib/json.h"
#include "lib/wire/report_json.h"
#include "lib/util.h"
#include "providers/views/views_json.h"

#define PENDING_MAX 4096 /* events waiting for the runner; beyond, dropped with a log line */


/* ---- pieces ------------------------------------------------------------------ */

bool hooks_event_matches(const char *pattern, const char *event)
{
	size_t n = strlen(pattern);

	if (streq(pattern, "*"))
		return true;
	if (n >= 2 && streq(pattern + n - 2, ".*"))
		return strncmp(pattern, event, n - 1) == 0; /* "grant." prefix */
	return streq(pattern, event);
}

static bool name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '-'))
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void hooks_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int hooks_list_dir(const char *dir, char ***names, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **v = NULL;
	size_t k = 0, cap = 0;

	*names = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct stat st;

		/* run-parts rules: skips editor backups, dpkg leftovers, dot files */
		if (!name_ok(de->d_name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode) ||
		    faccessat(dirfd(d), de->d_name, X_OK, 0) < 0)
			continue;
		if (k == cap) {
			char **nv = realloc(v, (cap ? cap * 2 : 8) * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
			cap = cap ? cap * 2 : 8;
		}
		v[k] = strdup(de->d_name);
		if (!v[k])
			goto nomem;
		k++;
	}
	closedir(d);
	if (k > 1)
		qsort(v, k, sizeof(*v), cmp_str);
	*names = v;
	*n = k;
	return 0;
nomem:
	closedir(d);
	hooks_names_free(v, k);
	return -ENOMEM;
}

static void random_id(char out[33])
{
	uint8_t b[16] = { 0 };
	static const char hex[] = "0123456789abcdef";

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		/* no entropy yet (early boot): time and address keep ids distinct enough */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(b, &ts, sizeof(ts) < sizeof(b) ? sizeof(ts) : sizeof(b));
	}
	for (size_t i = 0; i < sizeof(b); i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[32] = '\0';
}

json_t *hooks_event_json(const char *agent_id, const char *event, json_t *fields)
{
	char id[33], when[32];
	struct timespec ts;
	struct tm tm;
	json_t *ev = json_object();

	if (!ev)
		return NULL;
	random_id(id);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if ((fields && json_object_update(ev, fields) < 0) ||
	    json_object_set_new(ev, "type", json_string("event")) < 0 ||
	    json_object_set_new(ev, "event", json_string(event)) < 0 ||
	    json_object_set_new(ev, "event_id", json_string(id)) < 0 ||
	    json_object_set_new(ev, "agent", json_string(agent_id ? agent_id : "")) < 0 ||
	    json_object_set_new(ev, "time", json_string(when)) < 0) {
		json_decref(ev);
		return NULL;
	}
	return ev;
}

void hooks_env_free(char **env)
{
	if (!env)
		return;
	for (char **e = env; *e; e++)
		free(*e);
	free(env);
}

/* Appends NAME=V when V is a string or an integer. */
static int env_add(char ***env, size_t *n, const char *name, json_t *v)
{
	char *s = NULL, **ne;

	if (json_is_string(v))
		s = asprintf(&s, "%s=%s", name, json_string_value(v)) < 0 ? NULL : s;
	else if (json_is_integer(v))
		s = asprintf(&s, "%s=%lld", name, (long long)json_integer_value(v)) < 0 ? NULL : s;
	else if (json_is_boolean(v))
		s = asprintf(&s, "%s=%d", name, json_is_true(v)) < 0 ? NULL : s;
	else
		return 0;
	if (!s)
		return -ENOMEM;
	ne = realloc(*env, (*n + 2) * sizeof(**env));
	if (!ne) {
		free(s);
		return -ENOMEM;
	}
	*env = ne;
	ne[(*n)++] = s;
	ne[*n] = NULL;
	return 0;
}

char **hooks_env(json_t *ev)
{
	json_t *status = json_object_get(ev, "status");
	json_t *memory = json_object_get(status ? status : ev, "memory");
	json_t *block = json_object_get(ev, "block");
	json_t *message = json_object_get(ev, "message");
	json_t *err = json_object_get(block ? block : status, "error");
	const struct {
		const char *name;
		json_t *v;
	} vars[] = {
		{ "PATH", json_string("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") },
		{ "MEMGRANT_EVENT", json_incref(json_object_get(ev, "event")) },
		{ "MEMGRANT_EVENT_ID", json_incref(json_object_get(ev, "event_id")) },
		{ "MEMGRANT_AGENT", json_incref(json_object_get(ev, "agent")) },
		{ "MEMGRANT_TIME", json_incref(json_object_get(ev, "time")) },
		{ "MEMGRANT_GRANT_ID", json_incref(json_object_get(ev, "id")) },
		{ "MEMGRANT_KIND", json_incref(json_object_get(ev, "kind")) },
		{ "MEMGRANT_STATE", json_incref(json_object_get(ev, "state")) },
		{ "MEMGRANT_GENERATION", json_incref(json_object_get(status, "generation")) },
		{ "MEMGRANT_REQUESTED_BYTES", json_incref(json_object_get(status, "requested_bytes")) },
		{ "MEMGRANT_APPLIED_BYTES", json_incref(json_object_get(status, "applied_bytes")) },
		{ "MEMGRANT_SOURCE", json_incref(json_object_get(status, "source")) },
		{ "MEMGRANT_ONLINE_BYTES", json_incref(json_object_get(memory, "online_bytes")) },
		{ "MEMGRANT_STANDBY_BYTES", json_incref(json_object_get(memory, "standby_bytes")) },
		{ "MEMGRANT_BLOCK_SIZE", json_incref(json_object_get(memory, "block_size")) },
		{ "MEMGRANT_BLOCK", json_incref(json_object_get(block, "block")) },
		{ "MEMGRANT_ERROR_CODE", json_incref(json_object_get(err, "code")) },
		{ "MEMGRANT_ERROR", json_incref(json_object_get(err, "message")) },
		{ "MEMGRANT_BYTES", json_incref(json_object_get(message, "bytes")) },
		{ "MEMGRANT_REASON", json_incref(json_object_get(message, "reason")) },
	};
	char **env = calloc(1, sizeof(*env));
	size_t n = 0;
	bool ok = env != NULL;

	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		if (ok && env_add(&env, &n, vars[i].name, vars[i].v) < 0)
			ok = false;
		json_decref(vars[i].v);
	}
	if (!ok) {
		hooks_env_free(env);
		return NULL;
	}
	return env;
}

/* Whether PATH (a program of the hooks directory) is a program a hooks
 * entry names: that one runs for the events its entry lists, and only then,
 * not a second time as a run-parts program for every event.  Compared by
 * file (device and inode), so that another spelling of the path or a link
 * to it is the same program. */
static bool named_by_entry(const struct hooks *h, const char *path)
{
	struct stat st, e;

	if (stat(path, &st) < 0)
		return false;
	for (size_t i = 0; i < h->n_entries; i++)
		if (h->entries[i].exec && stat(h->entries[i].exec, &e) == 0 && e.st_dev == st.st_dev &&
		    e.st_ino == st.st_ino)
			return true;
	return false;
}

/* grant.STATE or revoke.STATE: a state the journal records. */
static bool is_op_event(const char *event)
{
	return strncmp(event, "grant.", 6) == 0 || strncmp(event, "revoke.", 7) == 0;
}

/* The webhook event of a grant's or revocation's STATUS, made while the
 * journal writes the record of that status and queued in that same record
 * (engine_event_subscribe()): delivered exactly when the state is durable,
 * never lost to a write that failed in between.  NULL when the entry does
 * not want it. */
static json_t *journal_event(void *ctx, const json_t *status)
{
	const struct hook_entry *e = ctx;
	const char *id = json_string_value(json_object_get(status, "id"));
	const char *kind = json_string_value(json_object_get(status, "kind"));
	const char *state = json_string_value(json_object_get(status, "state"));
	_cleanup_json_ json_t *fields = NULL;
	char event[64];
	bool match = false;

	if (!id || !kind || !state)
		return NULL;
	snprintf(event, sizeof(event), "%s.%s", kind, state);
	for (size_t k = 0; k < e->n_events && !match; k++)
		match = hooks_event_matches(e->events[k], event);
	if (!match)
		return NULL;
	fields = json_pack("{s:s,s:s,s:s,s:o}", "id", id, "kind", kind, "state", state, "status",
			   json_deep_copy(status));
	return fields ? hooks_event_json(e->owner->agent_id, event, fields) : NULL;
}

/* Builds EVENT and queues its runs: on the runner thread only, which takes
 * events in the order they were posted (post_event()). */
static int fire_now(struct hooks *h, const char *event, json_t *fields)
{
	_cleanup_json_ json_t *ev = hooks_event_json(h->agent_id, event, fields);
	_cleanup_free_ char *text = NULL;
	char **names = NULL;
	size_t n_names = 0;

	if (!ev)
		return -ENOMEM;
	text = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	log_debug(&h->log, "event %s", text);
	for (size_t i = 0; i < h->n_entries; i++) {
		const struct hook_entry *e = &h->entries[i];
		bool match = false;

		for (size_t k = 0; k < e->n_events && !match; k++)
			match = hooks_event_matches(e->events[k], event);
		if (!match)
			continue;
		if (e->webhook) {
			int r;

			/* a grant's or revocation's state: queued already, in the journal's
			 * record of that state (journal_event()) */
			if (e->journaled && is_op_event(event))
				continue;
			r = h->daemon ? views_outbox_push(h->daemon, e->dest, ev) : -ENOTCONN;
			if (r < 0)
				log_err(&h->log, "hooks[%zu]: cannot queue %s for the webhook: %s", i, event,
					strerror(-r));
		} else {
			char name[64];
			struct job *j;

			snprintf(name, sizeof(name), "hooks[%zu]", i);
			j = hooks_job_new(e->exec, name, event, text, ev, e->timeout_ms);
			if (!j)
				return -ENOMEM;
			hooks_enqueue(h, j);
		}
	}
	if (h->dir) {
		int r = hooks_list_dir(h->dir, &names, &n_names);
		if (r < 0 && r != -ENOENT)
			log_warn(&h->log, "hooks directory %s: %s", h->dir, strerror(-r));
		for (size_t i = 0; i < n_names; i++) {
			_cleanup_free_ char *path = NULL;
			struct job *j;

			if (asprintf(&path, "%s/%s", h->dir, names[i]) < 0)
				path = NULL;
			if (path && named_by_entry(h, path))
				continue;
			j = path ? hooks_job_new(path, path, event, text, ev, h->dir_timeout_ms) : NULL;
			if (!j) {
				hooks_names_free(names, n_names);
				return -ENOMEM;
			}
			hooks_enqueue(h, j);
		}
		hooks_names_free(names, n_names);
	}
	return 0;
}
/* ---- following the engine ------------------------------------------------------ */

/* Queues P (taken) behind the events already waiting: the runner fires them
 * in the order they were posted, so that each hook sees the engine's
 * transitions and the agent's own events (agent.stopping) in the order they
 * happened.  ID names what the event is about, for the log. */
static int post_event(struct hooks *h, struct pending *p, const char *id)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_pending >= PENDING_MAX || hooks_runner_need_locked(h) < 0) {
		bool full = h->n_pending >= PENDING_MAX;

		pthread_mutex_unlock(&h->lock);
		log_warn(&h->log, "hooks: %s of %s dropped (%s)", p->event, id,
			 full ? "too many events waiting" : "no thread to fire it");
		json_decref(p->fields);
		free(p);
		return full ? -ENOBUFS : -EAGAIN;
	}
	if (h->p_tail)
		h->p_tail->next = p;
	else
		h->p_head = p;
	h->p_tail = p;
	h->n_pending++;
	pthread_mutex_unlock(&h->lock);
	hooks_wake(h);
	return 0;
}

/* Called by the engine with its lock held: copy, queue, return. */
static void on_transition(void *ctx, const struct engine_transition *t)
{
	struct hooks *h = ctx;
	const char *kind = msg_type_name(t->type), *state = msg_state_name(t->state);
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return;
	_cleanup_json_ json_t *status = t->report ? report_to_json(t->report) : NULL;
	_cleanup_json_ json_t *block = t->block_report && t->report ? report_block_json(t->block_report, t->report->block_size)
								  : NULL;

	if (t->kind == ENGINE_T_BLOCK_FAILED) {
		snprintf(p->event, sizeof(p->event), "block.failed");
		p->fields = json_pack("{s:s,s:s,s:s,s:O?,s:O?}", "id", t->id, "kind", kind, "state", state, "block",
				      block, "status", status);
	} else if (t->kind == ENGINE_T_BLOCK_CHANGED) {
		snprintf(p->event, sizeof(p->event), "block.changed");
		p->fields = json_pack("{s:s,s:s,s:s,s:I,s:I,s:O?}", "id", t->id, "kind", kind, "state", state, "block",
				      (json_int_t)t->block, "applied_bytes", (json_int_t)t->applied_bytes, "status",
				      status);
	} else {
		snprintf(p->event, sizeof(p->event), "%s.%s", kind, state);
		p->fields = json_pack("{s:s,s:s,s:s,s:O?}", "id", t->id, "kind", kind, "state", state, "status",
				      status);
	}
	if (!p->fields) {
		log_warn(&h->log, "hooks: %s of %s dropped (out of memory)", p->event, t->id);
		free(p);
		return;
	}
	post_event(h, p, t->id);
}

int hooks_fire(struct hooks *h, const char *event, json_t *fields)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	snprintf(p->event, sizeof(p->event), "%s", event);
	if (fields && !(p->fields = json_deep_copy(fields))) {
		free(p);
		return -ENOMEM;
	}
	return post_event(h, p, "the agent");
}

void hooks_fire_pending(struct hooks *h)
{
	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct pending *p = h->p_head;

		if (!p)
			break;
		h->p_head = p->next;
		if (!h->p_head)
			h->p_tail = NULL;
		h->n_pending--;
		pthread_mutex_unlock(&h->lock);
		fire_now(h, p->event, p->fields);
		json_decref(p->fields);
		free(p);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
}

/* ---- life cycle ------------------------------------------------------------------------ */

static void entries_free(struct hook_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < e[i].n_events; k++)
			free(e[i].events[k]);
		free(e[i].events);
		free(e[i].exec);
		webhook_free(e[i].webhook);
	}
	free(e);
}

int hooks_new(const struct hooks_params *p, const struct mg_log *log, struct hooks **out)
{
	struct hooks *h = calloc(1, sizeof(*h));
	int r = -ENOMEM;

	if (!h)
		return -ENOMEM;
	h->log = *log;
	h->daemon = p->daemon;
	h->wake_fd = -1;
	h->dir_timeout_ms = p->dir_timeout_ms ? p->dir_timeout_ms : HOOKS_DIR_TIMEOUT_DEFAULT;
	h->max_running = p->max_running ? p->max_running : HOOKS_MAX_RUNNING_DEFAULT;
	h->max_queued = p->max_queued ? p->max_queued : HOOKS_MAX_QUEUED_DEFAULT;
	h->output_max = p->output_max ? p->output_max : HOOKS_OUTPUT_MAX_DEFAULT;
	pthread_mutex_init(&h->lock, NULL);
	h->agent_id = strdup(p->agent_id ? p->agent_id : "");
	if (!h->agent_id || (p->dir && !(h->dir = strdup(p->dir))))
		goto fail;
	h->entries = calloc(p->n_hooks + 1, sizeof(*h->entries));
	if (!h->entries)
		goto fail;
	for (size_t i = 0; i < p->n_hooks; i++) {
		const struct mg_hook *c = &p->hooks[i];
		struct hook_entry *e = &h->entries[h->n_entries++];

		e->timeout_ms = c->timeout_ms ? c->timeout_ms : HOOKS_DIR_TIMEOUT_DEFAULT;
		e->events = calloc(c->n_events + 1, sizeof(*e->events));
		if (!e->events)
			goto fail;
		for (size_t k = 0; k < c->n_events; k++) {
			e->events[k] = strdup(c->events[k]);
			if (!e->events[k])
				goto fail;
			e->n_events++;
		}
		if (c->exec) {
			e->exec = strdup(c->exec);
			if (!e->exec)
				goto fail;
		} else if (c->webhook) {
			struct webhook_params wp = { .url = c->webhook,
						     .secret_file = c->secret_file,
						     .creds = p->creds,
						     .insecure_http = c->insecure_http,
						     .timeout_ms = e->timeout_ms };
			r = webhook_new(&wp, p->daemon, log, &e->webhook);
			if (r < 0) {
				log_err(log, "hooks[%zu]: webhook %s: %s", i, c->webhook, strerror(-r));
				goto fail;
			}
			snprintf(e->dest, sizeof(e->dest), "%s", webhook_dest(e->webhook));
			r = -ENOMEM;
		} else {
			r = -EINVAL;
			goto fail;
		}
	}
	h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->wake_fd < 0) {
		r = -errno;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	hooks_free(h);
	return r;
}

int hooks_start(struct hooks *h)
{
	int r;

	if (h->daemon) {
		/* the journal's events first: a transition heard before a webhook's
		 * record subscription would be queued a second time, under
		 * another event id, by fire_now() */
		h->subscribed = true;
		for (size_t i = 0; i < h->n_entries; i++)
			if (h->entries[i].webhook) {
				struct hook_entry *e = &h->entries[i];

				e->owner = h;
				r = engine_event_subscribe(h->daemon, e->dest, journal_event, e);
				if (r < 0)
					return r;
				e->journaled = true;
			}
		r = engine_subscribe(h->daemon, on_transition, h);
		if (r < 0)
			return r;
		for (size_t i = 0; i < h->n_entries; i++)
			if (h->entries[i].webhook) {
				r = webhook_start(h->entries[i].webhook);
				if (r < 0)
					return r;
			}
	}
	return 0;
}

void hooks_stop(struct hooks *h)
{
	if (!h)
		return;
	if (h->subscribed) {
		engine_unsubscribe(h->daemon, on_transition, h);
		/* journaled stays set: the runner, which fires what is pending
		 * before it ends, must not queue those events a second time */
		for (size_t i = 0; i < h->n_entries; i++)
			if (h->entries[i].journaled)
				engine_event_unsubscribe(h->daemon, journal_event, &h->entries[i]);
		h->subscribed = false;
	}
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_mutex_unlock(&h->lock);
	hooks_wake(h);
	/* it fires what is pending first; none started, none pending */
	if (h->runner_started) {
		pthread_join(h->runner, NULL);
		h->runner_started = h->runner_left = false;
	}
	for (size_t i = 0; i < h->n_entries; i++)
		if (h->entries[i].webhook)
			webhook_stop(h->entries[i].webhook);
}

void hooks_free(struct hooks *h)
{
	if (!h)
		return;
	hooks_stop(h);
	while (h->q_head) {
		struct job *j = h->q_head;
		h->q_head = j->next;
		hooks_job_free(j);
	}
	while (h->p_head) {
		struct pending *p = h->p_head;
		h->p_head = p->next;
		json_decref(p->fields);
		free(p);
	}
	entries_free(h->entries, h->n_entries);
	if (h->wake_fd >= 0)
		close(h->wake_fd);
	pthread_mutex_destroy(&h->lock);
	free(h->agent_id);
	free(h->dir);
	free(h);
}

char *hooks_dir_for_config(const char *config_path)
{
	/* absolute: memgrantd may chdir("/") when it detaches */
	_cleanup_free_ char *abs = realpath(config_path, NULL);
	const char *slash;
	char *out = NULL;

	if (abs)
		config_path = abs;
	slash = strrchr(config_path, '/');

	if (!slash)
		return strdup("hooks.d");
	if (asprintf(&out, "%.*s/hooks.d", (int)(slash - config_path), config_path) < 0)
		return NULL;
	return out;
}

void hooks_fire_agent(struct hooks *h, struct engine *d, const char *event)
{
	struct engine_memory m;
	json_t *fields;

	if (!h)
		return;
	engine_memory(d, &m); /* zeros when the kernel cannot be read */
	fields = json_pack("{s:{s:I,s:I,s:I,s:I},s:s}", "memory", "block_size", (json_int_t)m.block_size,
			   "online_bytes", (json_int_t)m.online_bytes, "standby_bytes", (json_int_t)m.standby_bytes,
			   "granted_bytes", (json_int_t)m.granted_bytes, "version", MEMGRANT_VERSION);
	if (fields)
		hooks_fire(h, event, fields);
	json_decref(fields);
}
