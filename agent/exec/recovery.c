/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery on the executor thread.  See recovery.h.
 */
#include "agent/exec/recovery.h"

#include "hotplug/planner.h"
#include "lib/util.h"
#include "agent/engine/backend_setup.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"

/*
 * Credits BLOCK to a revocation's report STATUS (changed in place): the
 * block given back, applied_bytes and blocks_done raised.  Idempotent: a
 * block the report already shows given back is not counted twice.  Returns
 * true when it credited.
 */
static bool credit_status(struct report *rep, uint64_t block, uint64_t block_size)
{
	struct report_block *entry = (struct report_block *)report_find_block(rep, block);

	if (entry && !entry->error_code[0] && streq(entry->state, "offline"))
		return false; /* its report counts it already: the crash came after it was recorded */
	if (!entry) {
		struct report_block *nb = reallocarray(rep->blocks, rep->n_blocks + 1, sizeof(*nb));
		if (!nb)
			return false;
		rep->blocks = nb;
		entry = &nb[rep->n_blocks++];
		*entry = (struct report_block){ .block = block, .memmap_on_memory = -1 };
	}
	snprintf(entry->state, sizeof(entry->state), "offline");
	entry->configured = false;
	entry->error_code[0] = entry->error_message[0] = '\0';
	rep->applied_bytes += block_size;
	rep->blocks_done++;
	return true;
}

enum intent_block_fate recovery_block_fate(enum intentlog_dir dir, int rb, const struct mem_block *b,
					   const char *owner, uint64_t boot_end)
{
	if (rb < 0)
		return FATE_UNTOUCHED; /* gone or unreadable: nothing to adopt or credit */
	if (dir == ILOG_UP) {
		if (!b->configured)
			return FATE_UNTOUCHED;
		if (owner[0] || b->id < boot_end)
			return FATE_REFUSED;
		return b->state == MEM_STATE_ONLINE ? FATE_DONE : FATE_HALF;
	}
	/* down: only a block the journal still calls owned is credited */
	if (!owner[0])
		return FATE_UNTOUCHED;
	if (mem_block_is_standby(b) || (!b->in_firmware && b->state == MEM_STATE_OFFLINE))
		return FATE_DONE;
	if (b->in_firmware && b->configured && b->state == MEM_STATE_OFFLINE)
		return FATE_HALF;
	return FATE_UNTOUCHED; /* still online: stays owned */
}

/* The privileged helper went away while recovery finished IT's blocks: the
 * intent stays open, as the crash left it, for the next start to read. */
static int stop_recovery(struct engine *e, const struct intentlog_intent *it)
{
	log_notice(&e->log, "%s: recovery of its intent stopped without the privileged helper; the intent stays "
		   "open for the next start", it->op);
	return -HP_EWRITER_GONE;
}

/*
 * One intent a crash left open: each named block is read from the kernel
 * and judged (recovery_block_fate); a half-done one is finished (up: or
 * undone when it cannot be); then one result closes the intent with the
 * blocks found done, in a non-final state: the operation is queued again
 * and resumes from what the result made its own.
 */
static int recover_intent(struct engine *e, const struct intentlog_intent *it, uint64_t block_size)
{
	_cleanup_free_ struct intentlog_done *done = calloc(it->n_blocks + 1, sizeof(*done));
	struct intentlog_grant g = { 0 };
	_cleanup_report_ struct report rep = { 0 };
	size_t n_done = 0, n_half = 0, n_refused = 0, mine = 0;
	uint64_t applied;
	bool up = it->dir == ILOG_UP;
	int r;

	if (!done)
		return -ENOMEM;
	for (size_t i = 0; i < it->n_blocks; i++) {
		const struct intentlog_target *tg = &it->blocks[i];
		struct intentlog_block jb = { 0 };
		struct mem_block b = { 0 };
		struct block_result res;
		enum intent_block_fate fate;
		int rb = hp_read_block(e->backend, tg->block, &b);

		pthread_mutex_lock(&e->lock);
		if (intentlog_find_owned_block(e->journal, tg->block, &jb) < 0)
			jb.grant_id[0] = '\0';
		pthread_mutex_unlock(&e->lock);
		fate = recovery_block_fate(it->dir, rb, &b, jb.grant_id, e->boot_end);
		if (fate == FATE_REFUSED) {
			n_refused++;
			log_warn(&e->log, "%s: block %llu of its intent is online but %s: not adopted", it->op,
				 (unsigned long long)tg->block, jb.grant_id[0] ? "owned by another grant" : "boot memory");
			continue;
		}
		if (fate == FATE_HALF && up) {
			struct exec_step s = { .kind = ILOG_UP, .block = tg->block, .memmap = -1,
						.online = mem_zone_online_type(tg->zone), .owner = it->op };
			n_half++;
			if (exec_block_step(e, &s, &res) == 1) {
				b = res.after;
				fate = FATE_DONE;
			} else if (res.err == -HP_EWRITER_GONE) {
				return stop_recovery(e, it);
			} else {
				log_fields(&e->log, LOG_WARNING,
					   LOG_FIELDS(log_f_grant(it->op), log_f_block(tg->block),
						      log_f_step(block_step_name(res.failed_step)), log_f_errno(res.err)),
					   "%s: block %llu: cannot finish bringing it up (%s), undoing", it->op,
					 (unsigned long long)tg->block, strerror(-res.err));
				s.kind = ILOG_DOWN;
				exec_block_step(e, &s, &res);
				if (res.err == -HP_EWRITER_GONE)
					return stop_recovery(e, it);
			}
		} else if (fate == FATE_HALF) {
			struct exec_step s = { .kind = ILOG_DOWN, .block = tg->block, .owner = it->op };
			n_half++;
			if (exec_block_step(e, &s, &res) == 1)
				fate = FATE_DONE;
			else if (res.err == -HP_EWRITER_GONE)
				return stop_recovery(e, it);
			else
				log_fields(&e->log, LOG_WARNING,
					   LOG_FIELDS(log_f_grant(it->op), log_f_block(tg->block),
						      log_f_step(block_step_name(res.failed_step)), log_f_errno(res.err)),
					   "%s: block %llu: cannot finish taking it down (%s)", it->op,
					 (unsigned long long)tg->block, strerror(-res.err));
		}
		if (fate != FATE_DONE)
			continue;
		done[n_done++] = (struct intentlog_done){ .block = tg->block, .zone = up ? mem_block_zone(&b) : MEM_ZONE_AUTO,
							  .memmap = b.memmap_on_memory == 1 };
	}

	pthread_mutex_lock(&e->lock);
	r = intentlog_get_grant(e->journal, it->op, &g);
	if (r < 0)
		goto out;
	if (up) {
		mine = g.n_blocks + n_done;
		applied = (uint64_t)mine * block_size;
	} else {
		if (intentlog_grant_report(&g, &rep) < 0) {
			/* no report recorded: one from the record itself */
			report_clear(&rep);
			snprintf(rep.id, sizeof(rep.id), "%s", g.id);
			snprintf(rep.source, sizeof(rep.source), "%s", g.source);
			rep.generation = g.generation;
			rep.kind = g.type;
		}
		rep.agent = e->agent_id;
		rep.state = g.state;
		rep.block_size = block_size;
		for (size_t i = 0; i < n_done; i++)
			credit_status(&rep, done[i].block, block_size);
		applied = rep.applied_bytes;

	}
	/* not final: the operation is queued again and finishes from here */
	r = intentlog_result(e->journal, it->op, msg_state_is_final(g.state) ? MSG_STATE_IN_PROGRESS : g.state, applied,
			     done, n_done, up ? NULL : &rep, NULL);
out:
	pthread_mutex_unlock(&e->lock);
	log_notice(&e->log, "%s: its %s of %zu block%s was interrupted: %zu found done%s, %zu half done, %zu refused%s%s",
		   it->op, up ? "bring-up" : "take-down", it->n_blocks, it->n_blocks == 1 ? "" : "s", n_done,
		   up ? " (adopted)" : " (given back)", n_half, n_refused, r < 0 ? "; cannot journal the result: " : "",
		   r < 0 ? strerror(-r) : "");
	intentlog_grant_done(&g);
	return r;
}

/* Every intent a crash left open, in the order written. */
static int recover_intents(struct engine *e)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct intentlog_intent *its = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_open_intents(e->journal, &its, &n);
	pthread_mutex_unlock(&e->lock);
	if (r < 0) {
		log_err(&e->log, "recovery: cannot read the open intents of the journal in %s: %s", e->state_dir,
			strerror(-r));
		return r;
	}
	if (n == 0) {
		intentlog_intents_free(its, n);
		return 0;
	}
	r = hp_discover(e->backend, &t);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = recover_intent(e, &its[i], t->block_size);
	if (r < 0 && r != -HP_EWRITER_GONE)
		log_err(&e->log, "recovery of the open intents: %s", strerror(-r));
	intentlog_intents_free(its, n);
	return r;
}

/*
 * Blocks the journal says are ours but the kernel no longer has online stop
 * counting as granted.  One that is configured but offline (an undo that
 * failed, or an operator's offline) is deconfigured first, so the storage
 * goes back to the hypervisor instead of being stranded (C13).
 */
static int reconcile_owned(struct engine *e)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_owned_blocks(e->journal, &jb, &n);
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct mem_block b;
		struct block_result res;

		r = hp_read_block(e->backend, jb[i].block, &b);
		if (r == 0 && b.configured && b.state != MEM_STATE_OFFLINE)
			continue;
		if (r == 0 && b.in_firmware && b.configured && b.state == MEM_STATE_OFFLINE) {
			struct exec_step s = { .kind = ILOG_DOWN, .block = jb[i].block,
						.owner = jb[i].grant_id };
			int k = exec_block_step(e, &s, &res);
			r = k < 0 ? k : res.err;
			if (r == -HP_EWRITER_GONE)
				return r; /* still the grant's: the next start looks again */
			log_warn(&e->log, "block %llu of %s was configured but offline: %s", (unsigned long long)jb[i].block,
				 jb[i].grant_id, r == 0 ? "deconfigured it" : "cannot deconfigure it");
		}
		log_fields(&e->log, LOG_WARNING, LOG_FIELDS(log_f_grant(jb[i].grant_id), log_f_block(jb[i].block)),
			   "block %llu of %s is %s outside the agent's control: no longer counted as granted",
			 (unsigned long long)jb[i].block, jb[i].grant_id,
			 r < 0 ? "gone" : !b.configured ? "deconfigured" : "offline");
		pthread_mutex_lock(&e->lock);
		intentlog_remove_owned_block(e->journal, jb[i].block);
		pthread_mutex_unlock(&e->lock);
	}
	return 0;
}

/* What a revocation had done before the agent stopped, from its last report. */
static void restore_revocation(struct op *o, const struct report *rep)
{
	o->applied_bytes = rep->applied_bytes;
	o->blocks_done = rep->blocks_done;
	for (size_t i = 0; i < rep->n_blocks; i++) {
		const struct report_block *b = &rep->blocks[i];
		struct outcome *oc = op_outcome(o, b->block, false);
		if (!oc)
			return;
		oc->configured = b->configured;
		snprintf(oc->state, sizeof(oc->state), "%s", b->state);
		snprintf(oc->zone, sizeof(oc->zone), "%s", b->zone);
		snprintf(oc->err_code, sizeof(oc->err_code), "%s", b->error_code);
		snprintf(oc->err_msg, sizeof(oc->err_msg), "%s", b->error_message);
	}
}

/* Grants a crash or stop left accepted or in progress go back into the queue. */
static int requeue_unfinished(struct engine *e)
{
	struct intentlog_grant *gs = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_list_grants(e->journal, &gs, &n);
	if (r < 0)
		log_err(&e->log, "recovery: cannot list the journaled requests in %s: %s", e->state_dir, strerror(-r));
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct engine_source *src;
		struct msg_error err;
		struct report rep;
		struct op *o;
		struct msg *m = NULL;

		if (msg_state_is_final(gs[i].state))
			continue;
		if (msg_from_json(gs[i].request, &m, &err) < 0) {
			log_err(&e->log, "%s: journaled request unreadable (%s): marking it failed", gs[i].id, err.message);
			intentlog_set_state(e->journal, gs[i].id, MSG_STATE_FAILED, NULL, NULL);
			continue;
		}
		src = engine_source_intern_locked(e, gs[i].source);
		o = src ? op_new(m, src) : NULL;
		if (!o) {
			if (!src)
				msg_free(m);
			r = -ENOMEM;
			break;
		}
		o->state = gs[i].state;
		if (intentlog_grant_report(&gs[i], &rep) == 0) {
			o->requested_bytes = rep.requested_bytes;
			if (o->msg->type == MSG_REVOKE)
				restore_revocation(o, &rep);
		}
		report_clear(&rep);
		log_notice(&e->log, "%s %s was %s when the agent stopped: resuming", msg_type_name(o->msg->type),
			   o->msg->id, msg_state_name(gs[i].state));
		engine_enqueue_locked(e, o);
	}
	pthread_mutex_unlock(&e->lock);
	intentlog_grants_free(gs, n);
	return r;
}

/*
 * No journal at all (a first start, or a state_dir that was lost) next to
 * standby memory that is online: those blocks were brought up by someone we
 * cannot know (an earlier install, an operator).  They stay foreign: no
 * grant owns them and no revocation takes them; say so loudly, once.
 * Standby memory is told from boot memory by memmap_on_memory=1 (kernel.md
 * C2: boot blocks read 0); where the kernel cannot do memmap on memory the
 * two look alike and nothing is named.
 */
static void warn_foreign_standby(struct engine *e)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ char *list = NULL;
	size_t n = 0, len = 0;

	if (!e->journal_fresh || hp_discover(e->backend, &t) < 0)
		return;
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		char *grown;
		int k;

		if (!b->in_firmware || !b->configured || b->state == MEM_STATE_OFFLINE || b->memmap_on_memory != 1)
			continue;
		grown = realloc(list, len + 24);
		if (!grown)
			return;
		list = grown;
		k = snprintf(list + len, 24, "%s%llu", n ? " " : "", (unsigned long long)b->id);
		len += (size_t)k;
		n++;
	}
	if (n)
		log_warn(&e->log, "no journal in %s, but %zu standby block%s online (%s): "
			 "they stay foreign, owned by no grant and never revoked", e->state_dir, n, n == 1 ? " is" : "s are", list);
}

/* Logs every failure itself (one line, with its context): engine_start()
 * and memgrantd only stop. */
int recovery_run(struct engine *e)
{
	int r;

	if (e->own_onlining)
		backend_take_over_onlining(e);
	warn_foreign_standby(e);
	r = recover_intents(e);
	if (r < 0)
		return r;
	r = reconcile_owned(e);
	if (r < 0)
		return r;
	return requeue_unfinished(e);
}
