/* SPDX-License-Identifier: MIT */
/*
 * Exec hooks: the job queue and the runner thread.  The runner spawns jobs
 * with posix_spawn, feeds their stdin, collects their output and kills them
 * at their deadline.  It never blocks on a child: everything is
 * non-blocking fds and poll() with the nearest deadline as timeout; exits
 * are noticed through pidfds (or, where pidfd_open is missing, a short poll
 * while a child runs).
 */
#include "providers/hooks/hooks_impl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "lib/timeutil.h"
#include "lib/util.h"

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
/* ---- jobs ---------------------------------------------------------------------- */

void hooks_job_free(struct job *j)
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

struct job *hooks_job_new(const char *path, const char *name, const char *event, const char *text,
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
		hooks_job_free(j);
		return NULL;
	}
	memcpy(j->input, text, j->input_len - 1);
	j->input[j->input_len - 1] = '\n';
	j->input[j->input_len] = '\0';
	return j;
}

void hooks_wake(struct hooks *h)
{
	uint64_t one = 1;

	if (write(h->wake_fd, &one, sizeof(one)) < 0) {
		/* saturated: the runner wakes anyway */
	}
}

/* Takes J; drops it with a log line when the queue is full. */
void hooks_enqueue(struct hooks *h, struct job *j)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_queued >= h->max_queued) {
		pthread_mutex_unlock(&h->lock);
		log_warn(&h->log, "hook %s for %s dropped: %u runs already waiting", j->name, j->event,
			 h->max_queued);
		hooks_job_free(j);
		return;
	}
	if (hooks_runner_need_locked(h) < 0) {
		pthread_mutex_unlock(&h->lock);
		log_warn(&h->log, "hook %s for %s dropped: no thread to run it", j->name, j->event);
		hooks_job_free(j);
		return;
	}
	if (h->q_tail)
		h->q_tail->next = j;
	else
		h->q_head = j;
	h->q_tail = j;
	h->n_queued++;
	pthread_mutex_unlock(&h->lock);
	hooks_wake(h);
}

/* ---- the runner ------------------------------------------------------------------ */

int hooks_runner_need_locked(struct hooks *h)
{
	int r;

	if ((h->runner_started && !h->runner_left) || h->stopping)
		return 0;
	if (h->runner_left) {
		/* it let go of the lock for good before it left: joined at once */
		pthread_join(h->runner, NULL);
		h->runner_started = h->runner_left = false;
	}
	r = -pthread_create(&h->runner, NULL, hooks_runner_main, h);
	if (r < 0)
		return r;
	h->runner_started = true;
	return 0;
}

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
	c->deadline = mono_ms() + j->timeout_ms;
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
	hooks_job_free(c->job);
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

/* Whether a run of hook NAME is among the N running KIDS. */
static bool hook_running(const struct child *kids, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (streq(kids[i].job->name, name))
			return true;
	return false;
}

void *hooks_runner_main(void *arg)
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

		hooks_fire_pending(h); /* their jobs join the queue */
		/* start what fits */
		pthread_mutex_lock(&h->lock);
		stopping = h->stopping;
		/* one run at a time per hook, in the queue's order: a hook sees the
		 * events in the order they happened (grant.accepted before
		 * grant.applied); different hooks run side by side */
		for (struct job **pp = &h->q_head, *prev = NULL; *pp && n_kids < h->max_running;) {
			struct job *j = *pp;
			int r;

			if (hook_running(kids, n_kids, j->name)) {
				prev = j;
				pp = &j->next;
				continue;
			}
			*pp = j->next;
			if (h->q_tail == j)
				h->q_tail = prev;
			h->n_queued--;
			j->next = NULL;
			pthread_mutex_unlock(&h->lock);
			r = spawn_child(h, j, &kids[n_kids]);
			if (r < 0) {
				log_warn(&h->log, "hook %s for %s: cannot run %s: %s", j->name, j->event, j->path,
					 strerror(-r));
				hooks_job_free(j);
			} else {
				log_debug(&h->log, "hook %s for %s: started, pid %d", j->name, j->event,
					  (int)kids[n_kids].pid);
				n_kids++;
			}
			pthread_mutex_lock(&h->lock);
		}
		if (stopping && !grace_end)
			grace_end = mono_ms() + HOOKS_STOP_GRACE_MS;
		if (!h->q_head && !h->p_head && n_kids == 0) {
			/* nothing left: the thread goes (the next event starts
			 * another), so an agent idle after its work has none */
			if (!stopping)
				h->runner_left = true;
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
		now = mono_ms();
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
		now = mono_ms();
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

