/* SPDX-License-Identifier: MIT */
/*
 * Hooks: the bus follower turns status messages into events, hooks_fire()
 * builds the event and queues one job per matching exec hook (and queues it
 * in the outbox of each matching webhook), and the runner thread spawns
 * jobs, feeds their stdin, collects their output and kills them at their
 * deadline.  The runner never blocks on a child: everything is non-blocking
 * fds and poll() with the nearest deadline as timeout; exits are noticed
 * through pidfds (or, where pidfd_open is missing, a short poll while a
 * child runs).
 */
#include "hooks.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "../lib/util.h"
#include "../agent/daemon.h"
#include "../agent/events.h"
#include "webhook.h"

#define TRACK_MAX 64         /* operations whose fired events are remembered */
#define TRACK_BLOCKS_MAX 256 /* failed blocks remembered per operation */
#define FOLLOW_WAIT_MS 60000 /* events_wait() slice; the bus wakes us on events and close */

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

/* One program run for one event. */
struct job {
	struct job *next;
	char *path;
	char *name;       /* for the log */
	char *event;
	char *input;      /* event JSON and a newline */
	size_t input_len;
	char **env;
	uint64_t timeout_ms;
};

struct child {
	struct job *job;
	pid_t pid;
	int pidfd;        /* -1: not available */
	int in_fd;        /* -1: all written (or the hook closed stdin) */
	size_t in_off;
	int out_fd;       /* -1: EOF */
	char *out;
	size_t out_len;
	bool truncated;
	uint64_t deadline;
	bool killed, exited;
	int wstatus;
};

/* What was already fired for one operation. */
struct track {
	char id[128];
	uint64_t generation;
	unsigned states;             /* bit per msg state name index */
	uint64_t *blocks;            /* blocks already reported failed */
	size_t n_blocks;
	uint64_t used;               /* LRU stamp */
};

struct hook_entry {
	char **events;
	size_t n_events;
	char *exec;
	uint64_t timeout_ms;
	struct webhook *webhook;     /* NULL for exec */
	char dest[WEBHOOK_DEST_MAX];
};

struct hooks {
	struct mg_log log;
	struct daemon *daemon;
	char *agent_id;
	char *dir;
	uint64_t dir_timeout_ms;
	unsigned max_running, max_queued;
	size_t output_max;
	struct hook_entry *entries;
	size_t n_entries;

	pthread_mutex_t lock;
	struct job *q_head, *q_tail;
	size_t n_queued;
	bool stopping;               /* runner: finish what is queued, then exit */
	int wake_fd;                 /* eventfd: a job was queued or stop began */
	bool runner_started, follower_started;
	pthread_t runner, follower;

	struct track tracks[TRACK_MAX];
	uint64_t track_clock;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

/* ---- jobs ---------------------------------------------------------------------- */

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->path);
	free(j->name);
	free(j->event);
	free(j->input);
	hooks_env_free(j->env);
	free(j);
}

static struct job *job_new(const char *path, const char *name, const char *event, const char *text,
			   json_t *ev, uint64_t timeout_ms)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->path = strdup(path);
	j->name = strdup(name);
	j->event = strdup(event);
	j->input_len = strlen(text) + 1;
	j->input = malloc(j->input_len + 1);
	j->env = hooks_env(ev);
	j->timeout_ms = timeout_ms;
	if (!j->path || !j->name || !j->event || !j->input || !j->env) {
		job_free(j);
		return NULL;
	}
	memcpy(j->input, text, j->input_len - 1);
	j->input[j->input_len - 1] = '\n';
	j->input[j->input_len] = '\0';
	return j;
}

static void wake(struct hooks *h)
{
	uint64_t one = 1;

	if (write(h->wake_fd, &one, sizeof(one)) < 0) {
		/* saturated: the runner wakes anyway */
	}
}

/* Takes J; drops it with a log line when the queue is full. */
static void enqueue(struct hooks *h, struct job *j)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_queued >= h->max_queued) {
		pthread_mutex_unlock(&h->lock);
		log_warn(&h->log, "hook %s for %s dropped: %u runs already waiting", j->name, j->event,
			 h->max_queued);
		job_free(j);
		return;
	}
	if (h->q_tail)
		h->q_tail->next = j;
	else
		h->q_head = j;
	h->q_tail = j;
	h->n_queued++;
	pthread_mutex_unlock(&h->lock);
	wake(h);
}

int hooks_fire(struct hooks *h, const char *event, json_t *fields)
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
			int r = h->daemon ? daemon_outbox_push(h->daemon, e->dest, ev) : -ENOTCONN;
			if (r < 0)
				log_err(&h->log, "hooks[%zu]: cannot queue %s for the webhook: %s", i, event,
					strerror(-r));
		} else {
			char name[64];
			struct job *j;

			snprintf(name, sizeof(name), "hooks[%zu]", i);
			j = job_new(e->exec, name, event, text, ev, e->timeout_ms);
			if (!j)
				return -ENOMEM;
			enqueue(h, j);
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
			j = path ? job_new(path, path, event, text, ev, h->dir_timeout_ms) : NULL;
			if (!j) {
				hooks_names_free(names, n_names);
				return -ENOMEM;
			}
			enqueue(h, j);
		}
		hooks_names_free(names, n_names);
	}
	return 0;
}

/* ---- the runner ------------------------------------------------------------------ */

static int spawn_child(struct hooks *h, struct job *j, struct child *c)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dflt;
	char *argv[] = { j->path, j->event, NULL };
	int r;

	if (pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		r = -errno;
		close(in[0]);
		close(in[1]);
		return r;
	}
	/* The child gets a clean slate: the daemon blocks SIGTERM & co. in every
	 * thread (signalfd) and a hook must not inherit that. */
	sigemptyset(&none);
	sigemptyset(&dflt);
	for (int s = 1; s < SIGRTMIN; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaddset(&dflt, s);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, out[1], 2);
	posix_spawn_file_actions_addchdir_np(&fa, "/");
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dflt);
	r = -posix_spawn(&c->pid, j->path, &fa, &attr, argv, j->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in[0]);
	close(out[1]);
	if (r < 0) {
		close(in[1]);
		close(out[0]);
		return r;
	}
	(void)h;
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	c->job = j;
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->in_off = 0;
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	c->deadline = now_ms() + j->timeout_ms;
	return 0;
}

/* Logs the captured output line by line, then how the run ended. */
static void child_finish(struct hooks *h, struct child *c)
{
	char *p = c->out, *end = c->out + c->out_len;
	int st = c->wstatus;

	while (p && p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		log_info(&h->log, "hook %s (%s): %.*s", c->job->name, c->job->event, (int)n, p);
		p += n + 1;
	}
	if (c->truncated)
		log_info(&h->log, "hook %s (%s): ... output beyond %zu bytes not logged", c->job->name,
			 c->job->event, h->output_max);
	if (c->killed)
		log_warn(&h->log, "hook %s for %s timed out after %.1fs: killed (SIGKILL to its process group)",
			 c->job->name, c->job->event, (double)c->job->timeout_ms / 1000);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		log_info(&h->log, "hook %s for %s: done", c->job->name, c->job->event);
	else if (WIFEXITED(st))
		log_warn(&h->log, "hook %s for %s failed: exit status %d", c->job->name, c->job->event,
			 WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		log_warn(&h->log, "hook %s for %s failed: killed by %s", c->job->name, c->job->event,
			 strsignal(WTERMSIG(st)));
	if (c->in_fd >= 0)
		close(c->in_fd);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->out);
	job_free(c->job);
	memset(c, 0, sizeof(*c));
}

static void child_read(struct hooks *h, struct child *c)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(c->out_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(c->out_fd);
			c->out_fd = -1;
			return;
		}
		if (c->out_len < h->output_max) {
			size_t take = (size_t)n < h->output_max - c->out_len ? (size_t)n : h->output_max - c->out_len;
			char *no = realloc(c->out, c->out_len + take);
			if (no) {
				memcpy(no + c->out_len, buf, take);
				c->out = no;
				c->out_len += take;
			}
			if (take < (size_t)n)
				c->truncated = true;
		} else {
			c->truncated = true;
		}
	}
}

static void child_write(struct child *c)
{
	while (c->in_off < c->job->input_len) {
		ssize_t n = write(c->in_fd, c->job->input + c->in_off, c->job->input_len - c->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			break; /* EPIPE: the hook does not read its stdin, which is its right */
		c->in_off += (size_t)n;
	}
	close(c->in_fd);
	c->in_fd = -1;
}

static void child_reap(struct child *c)
{
	if (!c->exited && waitpid(c->pid, &c->wstatus, WNOHANG) == c->pid)
		c->exited = true;
}

static void *runner_main(void *arg)
{
	struct hooks *h = arg;
	struct child *kids = calloc(h->max_running, sizeof(*kids));
	size_t n_kids = 0;
	uint64_t grace_end = 0;
	sigset_t pipe_set;

	/* a hook that exits without reading its stdin must not kill us */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	if (!kids) {
		log_err(&h->log, "hooks: out of memory, no hooks will run");
		return NULL;
	}
	for (;;) {
		struct pollfd *pfd;
		size_t np = 0;
		int timeout = -1;
		uint64_t now;
		bool stopping;

		/* start what fits */
		pthread_mutex_lock(&h->lock);
		stopping = h->stopping;
		while (h->q_head && n_kids < h->max_running) {
			struct job *j = h->q_head;
			int r;

			h->q_head = j->next;
			if (!h->q_head)
				h->q_tail = NULL;
			h->n_queued--;
			j->next = NULL;
			pthread_mutex_unlock(&h->lock);
			r = spawn_child(h, j, &kids[n_kids]);
			if (r < 0) {
				log_warn(&h->log, "hook %s for %s: cannot run %s: %s", j->name, j->event, j->path,
					 strerror(-r));
				job_free(j);
			} else {
				log_debug(&h->log, "hook %s for %s: started, pid %d", j->name, j->event,
					  (int)kids[n_kids].pid);
				n_kids++;
			}
			pthread_mutex_lock(&h->lock);
		}
		if (stopping && !grace_end)
			grace_end = now_ms() + HOOKS_STOP_GRACE_MS;
		if (stopping && !h->q_head && n_kids == 0) {
			pthread_mutex_unlock(&h->lock);
			break;
		}
		pthread_mutex_unlock(&h->lock);

		pfd = calloc(1 + 3 * n_kids, sizeof(*pfd));
		if (!pfd) {
			struct timespec ts = { 0, 100000000 };
			nanosleep(&ts, NULL);
			continue;
		}
		pfd[np++] = (struct pollfd){ .fd = h->wake_fd, .events = POLLIN };
		now = now_ms();
		for (size_t i = 0; i < n_kids; i++) {
			struct child *c = &kids[i];
			uint64_t dl = c->deadline;

			if (grace_end && grace_end < dl)
				dl = grace_end;
			pfd[np++] = (struct pollfd){ .fd = c->in_fd, .events = POLLOUT };
			pfd[np++] = (struct pollfd){ .fd = c->out_fd, .events = POLLIN };
			pfd[np++] = (struct pollfd){ .fd = c->exited ? -1 : c->pidfd, .events = POLLIN };
			if (!c->killed) {
				int t = dl > now ? (int)(dl - now) : 0;
				if (timeout < 0 || t < timeout)
					timeout = t;
			}
			/* no pidfd, or output closed early: look again soon */
			if ((c->pidfd < 0 || c->out_fd < 0 || c->killed) && !c->exited &&
			    (timeout < 0 || timeout > 50))
				timeout = 50;
			if (c->exited && c->out_fd >= 0 && (timeout < 0 || timeout > (int)(dl > now ? dl - now : 0)))
				timeout = (int)(dl > now ? dl - now : 0);
		}
		if (poll(pfd, np, timeout) < 0 && errno != EINTR) {
			log_err(&h->log, "hooks: poll: %s", strerror(errno));
			free(pfd);
			break;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(h->wake_fd, &v, sizeof(v)) < 0) {
				/* drained elsewhere */
			}
		}
		now = now_ms();
		for (size_t i = 0; i < n_kids; i++) {
			struct child *c = &kids[i];
			struct pollfd *p = &pfd[1 + 3 * i];
			uint64_t dl = grace_end && grace_end < c->deadline ? grace_end : c->deadline;

			if (c->in_fd >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
				child_write(c);
			if (c->out_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
				child_read(h, c);
			child_reap(c);
			if (!c->exited && !c->killed && now >= dl) {
				kill(-c->pid, SIGKILL);
				c->killed = true;
			}
			/* done once it exited and its output ended (or a child it
			 * left behind holds the pipe past the deadline) */
			if (c->exited && c->out_fd >= 0 && now >= dl) {
				child_read(h, c);
				if (c->out_fd >= 0) {
					close(c->out_fd);
					c->out_fd = -1;
				}
			}
			if (c->exited && c->out_fd < 0) {
				child_finish(h, c);
				kids[i] = kids[n_kids - 1];
				memset(&kids[n_kids - 1], 0, sizeof(kids[0]));
				/* the last child moves here with its poll results; look at it now */
				memmove(&pfd[1 + 3 * i], &pfd[1 + 3 * (n_kids - 1)], 3 * sizeof(*pfd));
				n_kids--;
				i--;
			}
		}
		free(pfd);
	}
	free(kids);
	return NULL;
}

/* ---- following the bus ------------------------------------------------------------ */

static const char *const track_states[] = { "accepted", "in_progress", "applied",
					    "partial",  "failed",      "rejected" };

static struct track *track_get(struct hooks *h, const char *id, uint64_t generation)
{
	struct track *lru = &h->tracks[0];

	h->track_clock++;
	for (size_t i = 0; i < TRACK_MAX; i++) {
		struct track *t = &h->tracks[i];
		if (t->id[0] && streq(t->id, id) && t->generation == generation) {
			t->used = h->track_clock;
			return t;
		}
		if (t->used < lru->used)
			lru = t;
	}
	free(lru->blocks);
	memset(lru, 0, sizeof(*lru));
	snprintf(lru->id, sizeof(lru->id), "%s", id);
	lru->generation = generation;
	lru->used = h->track_clock;
	return lru;
}

static void track_drop(struct track *t)
{
	free(t->blocks);
	memset(t, 0, sizeof(*t));
}

static bool track_block(struct track *t, uint64_t block)
{
	uint64_t *nb;

	for (size_t i = 0; i < t->n_blocks; i++)
		if (t->blocks[i] == block)
			return false;
	if (t->n_blocks >= TRACK_BLOCKS_MAX)
		return false;
	nb = realloc(t->blocks, (t->n_blocks + 1) * sizeof(*nb));
	if (!nb)
		return false;
	t->blocks = nb;
	t->blocks[t->n_blocks++] = block;
	return true;
}

/* A status message from the bus: fire kind.state once per operation and
 * block.failed once per failed block. */
static void on_status(struct hooks *h, json_t *st)
{
	const char *kind = json_string_value(json_object_get(st, "kind"));
	const char *id = json_string_value(json_object_get(st, "id"));
	const char *state = json_string_value(json_object_get(st, "state"));
	uint64_t gen = (uint64_t)json_integer_value(json_object_get(st, "generation"));
	json_t *blocks = json_object_get(st, "blocks"), *b;
	struct track *t;
	size_t i, si;
	bool final;
	char name[64];

	if (!kind || !id || !state || !(streq(kind, "grant") || streq(kind, "revoke")))
		return;
	for (si = 0; si < ARRAY_SIZE(track_states); si++)
		if (streq(state, track_states[si]))
			break;
	if (si == ARRAY_SIZE(track_states))
		return;
	json_object_del(st, "seq");
	t = track_get(h, id, gen);
	json_array_foreach(blocks, i, b) {
		json_t *err = json_object_get(b, "error");
		json_t *fields;

		if (!json_is_object(err) || !json_is_integer(json_object_get(b, "block")) ||
		    !track_block(t, (uint64_t)json_integer_value(json_object_get(b, "block"))))
			continue;
		fields = json_pack("{s:s,s:s,s:s,s:O,s:O}", "id", id, "kind", kind, "state", state, "block", b,
				   "status", st);
		if (fields)
			hooks_fire(h, "block.failed", fields);
		json_decref(fields);
	}
	if (!(t->states & (1u << si))) {
		json_t *fields = json_pack("{s:s,s:s,s:s,s:O}", "id", id, "kind", kind, "state", state,
					   "status", st);
		t->states |= 1u << si;
		snprintf(name, sizeof(name), "%s.%s", kind, state);
		if (fields)
			hooks_fire(h, name, fields);
		json_decref(fields);
	}
	final = !streq(state, "accepted") && !streq(state, "in_progress");
	if (final)
		track_drop(t);
}

static void *follower_main(void *arg)
{
	struct hooks *h = arg;
	struct event_bus *bus = daemon_events(h->daemon);
	uint64_t after = 0; /* from the bus's first event: reconciliation at start counts */

	for (;;) {
		_cleanup_free_ char *text = NULL;
		uint64_t seq = 0, missed = 0;
		json_t *msg;
		int r = events_wait(bus, after, FOLLOW_WAIT_MS, &text, &seq, &missed);

		pthread_mutex_lock(&h->lock);
		if (h->stopping)
			r = -EPIPE;
		pthread_mutex_unlock(&h->lock);
		if (r < 0)
			break;
		if (missed)
			log_warn(&h->log, "hooks: %llu events passed before the hooks could see them",
				 (unsigned long long)missed);
		if (r == 0)
			continue;
		after = seq;
		msg = json_loads(text, 0, NULL);
		if (msg && streq(json_string_value(json_object_get(msg, "type")) ?: "", "status"))
			on_status(h, msg);
		json_decref(msg);
	}
	return NULL;
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

	r = -pthread_create(&h->runner, NULL, runner_main, h);
	if (r < 0)
		return r;
	h->runner_started = true;
	if (h->daemon) {
		r = -pthread_create(&h->follower, NULL, follower_main, h);
		if (r < 0)
			return r;
		h->follower_started = true;
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
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_mutex_unlock(&h->lock);
	if (h->follower_started) {
		/* the follower sleeps on the bus; closing it is the only wake-up
		 * that does not need a timer, and at shutdown nobody else
		 * listens any more (the API stopped first) */
		events_close(daemon_events(h->daemon));
		pthread_join(h->follower, NULL);
		h->follower_started = false;
	}
	wake(h);
	if (h->runner_started) {
		pthread_join(h->runner, NULL);
		h->runner_started = false;
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
		job_free(j);
	}
	for (size_t i = 0; i < TRACK_MAX; i++)
		free(h->tracks[i].blocks);
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

void hooks_fire_agent(struct hooks *h, struct daemon *d, const char *event)
{
	json_t *st, *fields;

	if (!h)
		return;
	st = daemon_status_json(d);
	fields = json_pack("{s:O?,s:O?}", "memory", json_object_get(st, "memory"), "version",
			   json_object_get(st, "version"));
	if (fields)
		hooks_fire(h, event, fields);
	json_decref(fields);
	json_decref(st);
}
