/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery on the executor thread.  See recovery.h.
 */
#include "agent/exec/recovery.h"

#include "hotplug/planner.h"
#include "hotplug/words.h"
#include "lib/util.h"
#include "agent/engine/backend_setup.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"
#include "agent/exec/executor_impl.h"

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
		/* brought up by this intent, a block has the memmap_on_memory it
		 * names (block_bring_up() sets it first); one that differs was
		 * brought up by someone else (a later grant whose records a cut
		 * journal lost): not adopted, it stays foreign */
		if (up && e->opened.lost && (fate == FATE_DONE || fate == FATE_HALF)) {
			/* the journal lost records after this intent: what is up
			 * now may be a later grant's; not adopted, not finished */
			n_refused++;
			log_warn(&e->log, "%s: block %llu of its intent is configured, but the journal lost records "
				 "after the intent: maybe a later grant's, not adopted", it->op,
				 (unsigned long long)tg->block);
			continue;
		}
		if (up && fate != FATE_UNTOUCHED && fate != FATE_REFUSED && tg->memmap >= 0 && b.memmap_on_memory >= 0 &&
		    b.memmap_on_memory != tg->memmap) {
			n_refused++;
			log_warn(&e->log, "%s: block %llu of its intent is configured with memmap_on_memory=%d, not %d as "
				 "it would bring it up: someone else's (a journal that lost records?), not adopted",
				 it->op, (unsigned long long)tg->block, b.memmap_on_memory, tg->memmap);
			continue;
		}
		if (!up && e->opened.lost && fate == FATE_UNTOUCHED && jb.grant_id[0]) {
			/* online again after the cut: the revocation may have taken
			 * it and a later grant (records lost) brought it back; the
			 * grant the journal names loses it, so nothing revokes it
			 * twice: it is foreign until an operator adopts it */
			n_refused++;
			log_warn(&e->log, "%s: block %llu of its intent is online, but the journal lost records after "
				 "the intent: maybe taken by it and brought back since; no longer counted as %s's",
				 it->op, (unsigned long long)tg->block, jb.grant_id);
			pthread_mutex_lock(&e->lock);
			intentlog_remove_owned_block(e->journal, tg->block);
			pthread_mutex_unlock(&e->lock);
			continue;
		}
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
 * goes back to the hypervisor instead of being stranded (C13).  Sets how
 * many it released in *N_RELEASED_OUT, their ids in *RELEASED (freed by the
 * caller): evidence, after a damaged journal, that a revocation may have run
 * already.  Returns 0, or -HP_EWRITER_GONE when the helper died on the way
 * (the block stays the grant's: the next start looks again).
 */
static int reconcile_owned(struct engine *e, uint64_t **released, size_t *n_released_out)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	size_t n = 0, n_released = 0;
	int r;

	*n_released_out = 0;
	pthread_mutex_lock(&e->lock);
	r = intentlog_owned_blocks(e->journal, &jb, &n);
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return 0;
	*released = calloc(n + 1, sizeof(**released));
	for (size_t i = 0; i < n; i++) {
		struct mem_block b;
		struct block_result res;

		r = hp_read_block(e->backend, jb[i].block, &b);
		if (r == 0 && b.configured && b.state == MEM_STATE_ONLINE &&
		    ((b.memmap_on_memory >= 0 && (b.memmap_on_memory == 1) != jb[i].memmap) ||
		     (b.zones && mem_block_zone(&b) != jb[i].zone))) {
			/* memmap and zone only change by taking a block down: this is
			 * not the block the grant brought up but one brought up again
			 * since, by what the journal does not record (lost records) */
			log_fields(&e->log, LOG_WARNING, LOG_FIELDS(log_f_grant(jb[i].grant_id), log_f_block(jb[i].block)),
				   "block %llu of %s is online, but not as %s brought it up (memmap_on_memory %d, zone %s): "
				   "taken down and brought up again by what the journal does not record; no longer counted "
				   "as granted", (unsigned long long)jb[i].block, jb[i].grant_id, jb[i].grant_id,
				   b.memmap_on_memory, mem_zone_name(mem_block_zone(&b)));
			pthread_mutex_lock(&e->lock);
			intentlog_remove_owned_block(e->journal, jb[i].block);
			pthread_mutex_unlock(&e->lock);
			if (*released)
				(*released)[n_released++] = jb[i].block;
			continue;
		}
		if (r == 0 && b.configured && b.state != MEM_STATE_OFFLINE)
			continue;
		if (r == 0 && b.in_firmware && b.configured && b.state == MEM_STATE_OFFLINE) {
			struct exec_step s = { .kind = ILOG_DOWN, .block = jb[i].block,
						.owner = jb[i].grant_id };
			int k = exec_block_step(e, &s, &res);
			r = k < 0 ? k : res.err;
			if (r == -HP_EWRITER_GONE) {
				*n_released_out = n_released;
				return r; /* still the grant's: the next start looks again */
			}
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
		if (*released)
			(*released)[n_released++] = jb[i].block;
	}
	*n_released_out = n_released;
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

/*
 * An operation left unfinished whose journal may have lost what it did: it
 * is ended (rejected, or partial with what the journal still gives it)
 * instead of being run a second time over memory that may be its own.
 * WHY says what was found and what to do.  e->lock NOT held.
 */
static void refuse_resumed(struct engine *e, struct op *o, const char *why)
{
	abort_op(e, o, -EEXIST, NULL, "%s", why);
	op_free(o);
}

/*
 * Grants a crash or stop left accepted or in progress go back into the
 * queue, unless the kernel says the journal may have lost their work:
 * a grant is not resumed while standby memory found at start is online and
 * owned by no grant (N_FOREIGN, LIST: the work of a grant whose records
 * were cut, for all the journal can tell), a revocation not when blocks
 * the journal gave to grants were found given back (N_RELEASED, RLIST).
 */
static int requeue_unfinished(struct engine *e, size_t n_foreign, const char *list, size_t n_released,
			      const char *rlist)
{
	struct intentlog_grant *gs = NULL;
	struct op **refused = NULL;
	size_t n = 0, n_refused = 0;
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_list_grants(e->journal, &gs, &n);
	if (r < 0)
		log_err(&e->log, "recovery: cannot list the journaled requests in %s: %s", e->state_dir, strerror(-r));
	if (r == 0 && !(refused = calloc(n + 1, sizeof(*refused))))
		r = -ENOMEM;
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
		if (o->msg->type != MSG_REVOKE) {
			o->blocks_done = gs[i].n_blocks;
			o->applied_bytes = gs[i].applied_bytes;
		}
		if (e->opened.lost || (o->msg->type == MSG_GRANT && n_foreign) ||
		    (o->msg->type == MSG_REVOKE && n_released)) {
			refused[n_refused++] = o;
			continue;
		}
		log_notice(&e->log, "%s %s was %s when the agent stopped: resuming", msg_type_name(o->msg->type),
			   o->msg->id, msg_state_name(gs[i].state));
		engine_enqueue_locked(e, o);
	}
	pthread_mutex_unlock(&e->lock);
	intentlog_grants_free(gs, n);
	for (size_t i = 0; i < n_refused; i++) {
		char why[512];

		if (e->opened.lost && refused[i]->msg->type == MSG_REVOKE)
			/* a revocation answered before the cut may have run whole:
			 * sending it again would take that memory a second time */
			snprintf(why, sizeof(why),
				 "outcome unknown: the journal lost the records after it (cut, or an older copy), so it "
				 "may have been applied before the cut; do not send it again before `memgrantctl lsmem` "
				 "shows the memory it was to give back still online and owned%s%s",
				 n_foreign ? "; blocks now foreign: " : "", n_foreign ? list : "");
		else if (e->opened.lost)
			snprintf(why, sizeof(why),
				 "not resumed: the journal lost the records after it (cut, or an older copy), so it may "
				 "have finished and others followed; send it again if still wanted%s%s",
				 n_foreign ? ", after `memgrantctl adopt` of " : "", n_foreign ? list : "");
		else if (refused[i]->msg->type == MSG_GRANT)
			snprintf(why, sizeof(why),
				 "not resumed: blocks %s are online, owned by no grant, maybe its own (journal cut?); "
				 "memgrantctl adopt %s or restore journal.log from a backup, then send it again",
				 list, list);
		else
			snprintf(why, sizeof(why),
				 "not resumed: blocks %s of grants were found given back, maybe by it (journal cut?); "
				 "send it again if more memory should go back", rlist);
		if (e->opened.lost && refused[i]->msg->type == MSG_REVOKE)
			refused[i]->state = MSG_STATE_IN_PROGRESS; /* ends failed: not a refusal to send again */
		refuse_resumed(e, refused[i], why);
	}
	free(refused);
	return r;
}

/*
 * Every standby block that is configured (online or not) and that no grant
 * owns once the open intents are recovered: an earlier install, an operator,
 * or a grant whose records the journal lost (deleted, or cut at a record
 * boundary: a cut there looks like a clean end).  Boot memory is what the
 * backend knows it to be (e->boot_end), whatever the memmap setting.  They
 * stay foreign (no grant's, never revoked), grants wait until an operator
 * adopts or releases them (machine_start_foreign_locked), and one loud line
 * names them, with what to do.  Returns how many, their list in LIST.
 */
static size_t name_foreign_standby(struct engine *e, const struct intentlog_opened *opened, char *list,
				   size_t len)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;
	char why[192];

	list[0] = '\0';
	/* the live table (recovery's own writes applied), not another discovery */
	if (plan_table(e, &t) < 0)
		return 0;
	ids = calloc(t->n + 1, sizeof(*ids));
	if (!ids)
		return 0;
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		if (b->id < e->boot_end || !b->configured || (!b->in_firmware && b->state == MEM_STATE_OFFLINE) ||
		    intentlog_find_owned_block(e->journal, b->id, NULL) == 0)
			continue;
		ids[n++] = b->id;
	}
	free(e->start_foreign);
	e->start_foreign = n ? TAKE_PTR(ids) : NULL;
	e->n_start_foreign = n;
	pthread_mutex_unlock(&e->lock);
	if (!n)
		return 0;
	words_block_list_format(e->start_foreign, n, list, len);
	if (opened->fresh)
		snprintf(why, sizeof(why), "there is no journal in %s (deleted, or a first start after another install)",
			 e->state_dir);
	else if (opened->lost)
		snprintf(why, sizeof(why), "journal.log in %s ends at byte %llu but had reached byte %llu: acknowledged "
			 "records are gone (cut, or an older copy put back)", e->state_dir,
			 (unsigned long long)opened->torn_offset, (unsigned long long)opened->lost_end);
	else if (opened->torn)
		snprintf(why, sizeof(why), "the journal in %s lost its tail (%s)", e->state_dir, opened->torn_why);
	else
		snprintf(why, sizeof(why), "the journal in %s does not account for them (brought up outside memgrant, "
			 "or journal.log lost its last records)", e->state_dir);
	log_warn(&e->log, "foreign standby memory: %zu block%s (%s) %s configured and owned by no grant: %s. "
		 "They stay foreign (never revoked, no grant's) and grants are refused until they are resolved: "
		 "if memgrant brought them up, run `memgrantctl adopt %s` or stop memgrantd and restore "
		 "journal.log from a backup; if not, take them down (chmem -d, or memgrantctl block offline/deconfigure)",
		 n, n == 1 ? "" : "s", list, n == 1 ? "is" : "are", why, list);
	return n;
}

/* Logs every failure itself (one line, with its context): engine_start()
 * and memgrantd only stop. */
int recovery_run(struct engine *e)
{
	_cleanup_free_ uint64_t *released = NULL;
	char list[160], rlist[160] = "";
	size_t n_foreign, n_released;
	int r;

	if (e->own_onlining)
		backend_take_over_onlining(e);
	r = recover_intents(e);
	if (r < 0)
		return r;
	r = reconcile_owned(e, &released, &n_released);
	if (r < 0)
		return r;
	if (n_released && released)
		words_block_list_format(released, n_released, rlist, sizeof(rlist));
	n_foreign = name_foreign_standby(e, &e->opened, list, sizeof(list));
	return requeue_unfinished(e, n_foreign, list, n_released, rlist);
}
