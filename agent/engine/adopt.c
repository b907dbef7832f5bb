/* SPDX-License-Identifier: MIT */
/*
 * engine_adopt() (agent/engine/engine.h): online blocks that no grant owns become a
 * local grant record, checked block by block against the kernel and durable
 * in one journal batch before the answer.  Nothing is written to the kernel.
 */
#include <inttypes.h>
#include <time.h>

#include "hotplug/policy.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/admission.h"
#include "agent/engine/engine_impl.h"


static int adoptable_locked(struct engine *e, uint64_t id, int rb, const struct mem_block *b, struct msg_error *err)
{
	struct intentlog_block jb;

	if (rb == -ENOENT)
		return msg_error_set(err, ENOENT, "block %llu: no such memory block", (unsigned long long)id);
	if (rb < 0)
		return msg_error_set(err, -rb, "block %llu: cannot read it: %s", (unsigned long long)id, strerror(-rb));
	if (id < e->boot_end)
		return msg_error_set(err, EPERM, "block %llu is boot memory (online since the start): not memgrant's to adopt",
				     (unsigned long long)id);
	if (!b->configured)
		return msg_error_set(err, EINVAL, "block %llu is standby (not configured): there is nothing to adopt; "
				     "grant it instead", (unsigned long long)id);
	if (b->state != MEM_STATE_ONLINE)
		return msg_error_set(err, EINVAL, "block %llu is configured but %s: only an online block can be adopted "
				     "(bring it online, or release it: memgrantctl block deconfigure %llu)",
				     (unsigned long long)id, mem_state_name(b->state), (unsigned long long)id);
	if (e->step_active && e->step_block == id)
		return msg_error_set(err, EBUSY, "block %llu is being changed by memgrantd right now", (unsigned long long)id);
	if (machine_find_owned_locked(e, id, &jb) == 0)
		return msg_error_set(err, EEXIST, "block %llu is owned by %s already", (unsigned long long)id, jb.grant_id);
	return 0;
}

/* The grant by blocks an operator would have sent for the N BLOCKS (the
 * checks of a parsed "blocks" list: at most MSG_LIST_MAX, no repeats). */
static int adopt_msg(const uint64_t *blocks, size_t n, struct msg **out, struct msg_error *err)
{
	_cleanup_msg_ struct msg *m = NULL;

	if (n > MSG_LIST_MAX)
		return msg_error_set(err, E2BIG, "field \"blocks\": %zu entries, at most %d allowed", n, MSG_LIST_MAX);
	for (size_t i = 0; i < n; i++) {
		if (blocks[i] > INT64_MAX)
			return msg_error_set(err, EINVAL, "field \"blocks[%zu]\": %" PRIu64 " is out of range", i,
					     blocks[i]);
		for (size_t k = 0; k < i; k++)
			if (blocks[i] == blocks[k])
				return msg_error_set(err, EINVAL, "field \"blocks\": block %" PRIu64 " is listed twice",
						     blocks[i]);
	}
	m = calloc(1, sizeof(*m));
	if (m)
		m->blocks = calloc(n, sizeof(*m->blocks));
	if (!m || !m->blocks)
		return msg_error_set(err, ENOMEM, "out of memory");
	m->type = MSG_GRANT;
	m->target = MSG_BY_BLOCKS;
	m->memmap = MSG_MEMMAP_AUTO;
	m->zone = MEM_ZONE_AUTO;
	memcpy(m->blocks, blocks, n * sizeof(*blocks));
	m->n_blocks = n;
	*out = TAKE_PTR(m);
	return 0;
}

int engine_adopt(struct engine *e, const struct engine_source *src, const uint64_t *blocks, size_t n,
		 struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_report_ struct report rt = { 0 };
	_cleanup_free_ struct intentlog_done *done = NULL;
	_cleanup_free_ struct mem_block *kb = NULL;
	_cleanup_free_ int *rb = NULL;
	struct msg_error merr;
	struct msg *m = NULL;
	struct op *o = NULL;
	int r;

	if (!v || !src || !blocks || n == 0)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	/* a grant by blocks, as an operator would have asked for them */
	r = adopt_msg(blocks, n, &m, &merr);
	if (r < 0) {
		v->error = merr;
		return refuse(v, r);
	}
	done = calloc(n, sizeof(*done));
	kb = calloc(n, sizeof(*kb));
	rb = calloc(n, sizeof(*rb));
	r = done && kb && rb ? machine_snapshot(e, &t) : -ENOMEM;
	if (r < 0) {
		msg_free(m);
		msg_error_set(&v->error, -r, "cannot read the memory blocks: %s", strerror(-r));
		return refuse(v, r);
	}
	/* the kernel as it is now, not the table's last notification */
	for (size_t i = 0; i < n; i++)
		rb[i] = hp_read_block(e->backend, blocks[i], &kb[i]);

	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		r = msg_error_set(&v->error, ESHUTDOWN, "the agent is stopping; adopt again when it is back");
		goto refused;
	}
	for (size_t i = 0; i < n; i++) {
		r = adoptable_locked(e, blocks[i], rb[i], &kb[i], &v->error);
		if (r < 0)
			goto refused;
		done[i] = (struct intentlog_done){ .block = blocks[i], .zone = mem_block_zone(&kb[i]),
						   .memmap = kb[i].memmap_on_memory == 1 };
	}
	r = number_locked(e, src, m, &v->error);
	if (r < 0)
		goto refused;
	o = op_new(m, src);
	m = NULL;
	if (!o) {
		r = msg_error_set(&v->error, ENOMEM, "out of memory");
		goto refused;
	}
	o->state = MSG_STATE_APPLIED;
	o->requested_bytes = o->applied_bytes = (uint64_t)n * t->block_size;
	o->blocks_total = o->blocks_done = n;
	for (size_t i = 0; i < n; i++) {
		struct outcome *oc = op_outcome(o, blocks[i], false);
		if (oc)
			outcome_from_block(oc, &kb[i]);
	}
	op_add_decision(o, "adopted by an operator: %zu block%s found online outside memgrant", n, n == 1 ? "" : "s");
	/* the record and the ownership in one write, durable before the answer */
	r = op_report(e, o, t, &rt);
	if (r == 0)
		r = intentlog_batch_begin(e->journal);
	if (r == 0) {
		r = intentlog_accept(e->journal, src->name, o->msg, MSG_STATE_APPLIED, &rt, op_report_dest(o));
		if (r == 0)
			r = intentlog_adopt(e->journal, o->msg->id, done, n, NULL);
		if (r == 0)
			r = intentlog_batch_end(e->journal);
		else
			intentlog_batch_abort(e->journal);
	}
	if (r < 0) {
		msg_error_set(&v->error, -r, "cannot record the adoption in the journal: %s", strerror(-r));
		log_err(&e->log, "%s", v->error.message);
		goto refused;
	}
	op_announce_locked(e, o, &rt);
	log_notice(&e->log, "grant %s: %zu block%s adopted by an operator (first %llu)", o->msg->id, n,
		   n == 1 ? "" : "s", (unsigned long long)blocks[0]);
	v->kind = ENGINE_ANSWERED;
	v->report = report_dup(&rt);
	r = 0;
	goto out;
refused:
	refuse(v, r);
	r = 0;
out:
	pthread_mutex_unlock(&e->lock);
	op_free(o);
	msg_free(m);
	return r;
}
