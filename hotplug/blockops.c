/* SPDX-License-Identifier: MIT */
/*
 * Block primitives: one block up or down, with undo (contract in blockops.h).
 *
 * Every decision is taken from the kernel's state of the block: the
 * reader's (blockops.h; the agent's live table, kept current from the
 * kernel's notifications and re-read after each change) or a read of the
 * backend, never from what the caller believes.  Undo runs in reverse order and its first failure is
 * reported in undo_err; the original failure is what the caller gets back.
 */
#include "hotplug/blockops.h"

#include "lib/util.h"

const char *block_step_name(enum block_step s)
{
	switch (s) {
	case STEP_NONE: return "none";
	case STEP_READ: return "read";
	case STEP_MEMMAP: return "memmap_on_memory";
	case STEP_CONFIGURE: return "configure";
	case STEP_ONLINE: return "online";
	case STEP_OFFLINE: return "offline";
	case STEP_DECONFIGURE: return "deconfigure";
	}
	return "unknown";
}

static int failed(struct block_result *res, enum block_step step, int err)
{
	res->failed_step = step;
	res->err = err;
	return err;
}

/* No undo through a writer that is gone (HP_EWRITER_GONE): it cannot reach
 * the kernel, and the caller stops where the kernel is. */
static bool can_undo(int err)
{
	return err != -HP_EWRITER_GONE;
}

static void keep_undo_err(struct block_result *res, int r)
{
	if (r < 0 && res->undo_err == 0)
		res->undo_err = r;
}

/* Reads the block into res->after; a failed read there is not an error of
 * the operation, which is already decided. */
static void read_after(struct hp_backend *b, uint64_t id, struct block_result *res)
{
	struct mem_block m;

	if (hp_read_block(b, id, &m) == 0)
		res->after = m;
}

/* The block's state before the first write or after write STEP. */
static int read_state(struct hp_backend *b, const struct block_reader *rd, uint64_t id, enum block_step step,
		      struct mem_block *out)
{
	return rd && rd->read ? rd->read(rd->ctx, b, id, step, out) : hp_read_block(b, id, out);
}

/* After the last write STEP succeeded: res->after from the reader. */
static void state_after(struct hp_backend *b, const struct block_reader *rd, uint64_t id, enum block_step step,
			struct block_result *res)
{
	struct mem_block m;

	if (read_state(b, rd, id, step, &m) == 0)
		res->after = m;
}

int block_bring_up(struct hp_backend *b, uint64_t id, int memmap, enum online_type type,
		   struct block_result *res)
{
	return block_bring_up_r(b, NULL, id, memmap, type, res);
}

int block_take_down(struct hp_backend *b, uint64_t id, struct block_result *res)
{
	return block_take_down_r(b, NULL, id, res);
}

int block_bring_up_r(struct hp_backend *b, const struct block_reader *rd, uint64_t id, int memmap,
		     enum online_type type, struct block_result *res)
{
	struct mem_block m;
	struct hp_write seq[HP_WRITE_SEQ_MAX];
	enum block_step step[HP_WRITE_SEQ_MAX];
	size_t n = 0, done = 0;
	bool set_memmap, configured_now;
	int r;

	memset(res, 0, sizeof(*res));
	r = read_state(b, rd, id, STEP_NONE, &m);
	if (r == 0 && rd && m.configured && m.state == MEM_STATE_ONLINE)
		r = read_state(b, rd, id, STEP_READ, &m); /* nothing to do: the kernel's word, not a row's */
	if (r == 0 && !m.configured && m.memmap_on_memory == MEM_MEMMAP_UNREAD)
		r = read_state(b, rd, id, STEP_MEMMAP, &m); /* what it is, to set it and to undo */
	if (r < 0)
		return failed(res, STEP_READ, r);
	res->after = m;
	if (m.state == MEM_STATE_GOING_OFFLINE) /* someone else is taking it down (W6) */
		return failed(res, STEP_READ, -EBUSY);
	/* An online block is up, whatever its zone and memmap: both can only
	 * change by taking it down first. */
	if (m.configured && m.state == MEM_STATE_ONLINE) {
		res->was_noop = true;
		return 0;
	}

	/* One sequence (hp_write_seq(): through the helper, one round trip):
	 * memmap_on_memory while deconfigured (C12), configure (C7), online
	 * (W5); the writes stop at the first that fails. */
	if (!m.configured) {
		if (memmap >= 0 && m.memmap_on_memory >= 0 && m.memmap_on_memory != memmap) {
			seq[n] = (struct hp_write){ HP_ATTR_MEMMAP, memmap ? "1" : "0" };
			step[n++] = STEP_MEMMAP;
		}
		seq[n] = (struct hp_write){ HP_ATTR_CONFIG, "1" };
		step[n++] = STEP_CONFIGURE;
	}
	seq[n] = (struct hp_write){ HP_ATTR_STATE, online_type_word(type) };
	step[n++] = STEP_ONLINE;
	r = hp_write_seq(b, id, seq, n, &done);
	for (size_t i = 0; i < done; i++)
		res->steps_done |= 1u << step[i];
	set_memmap = res->steps_done & (1u << STEP_MEMMAP);
	configured_now = res->steps_done & (1u << STEP_CONFIGURE);
	/* the reader's row takes the new memmap_on_memory: no notification
	 * tells of it, and the reads after the next writes keep it (a failed
	 * read leaves it to the next whole read) */
	if (set_memmap && rd)
		(void)read_state(b, rd, id, STEP_MEMMAP, &m);
	if (r == 0) {
		state_after(b, rd, id, STEP_ONLINE, res);
		return 0;
	}
	if (step[done] == STEP_ONLINE && configured_now && r == -EINVAL &&
	    read_state(b, rd, id, STEP_READ, &m) == 0 && m.configured && m.state == MEM_STATE_ONLINE) {
		/* W2 after C7: auto_online_blocks onlined it at the configure,
		 * possibly in another zone than asked; that is reported, not
		 * fought */
		res->after = m;
		res->auto_onlined = true;
		return 0;
	}
	if (configured_now && can_undo(r))
		keep_undo_err(res, block_deconfigure(b, id));
	if (set_memmap && can_undo(r) && res->undo_err == 0) {
		keep_undo_err(res, block_set_memmap(b, id, !memmap));
		if (rd) /* as after the write it undoes: the row takes it back */
			(void)read_state(b, rd, id, STEP_MEMMAP, &m);
	}
	read_after(b, id, res);
	return failed(res, step[done], r);
}

/* The online type that puts a block back into the zone it was in (A9). */
static enum online_type type_for_zone(const char *zone)
{
	if (streq(zone, "Movable"))
		return ONLINE_MOVABLE;
	if (streq(zone, "Normal") || streq(zone, "DMA") || streq(zone, "DMA32"))
		return ONLINE_KERNEL;
	return ONLINE_DEFAULT;
}

int block_take_down_r(struct hp_backend *b, const struct block_reader *rd, uint64_t id, struct block_result *res)
{
	static const struct hp_write down[] = { { HP_ATTR_STATE, "offline" }, { HP_ATTR_CONFIG, "0" } };
	struct mem_block m;
	bool offlined = false, deconfigured = false;
	char zone[MEM_ZONES_TEXT_MAX];
	size_t done = 0;
	int r;

	memset(res, 0, sizeof(*res));
	r = read_state(b, rd, id, STEP_NONE, &m);
	if (r == 0 && rd && (!m.configured || (!m.in_firmware && m.state == MEM_STATE_OFFLINE)))
		r = read_state(b, rd, id, STEP_READ, &m); /* nothing to do: the kernel's word, not a row's */
	if (r == 0 && !m.configured && m.memmap_on_memory == MEM_MEMMAP_UNREAD)
		r = read_state(b, rd, id, STEP_MEMMAP, &m); /* what it is, to set it and to undo */
	if (r < 0)
		return failed(res, STEP_READ, r);
	res->after = m;
	if (m.state == MEM_STATE_GOING_OFFLINE)
		return failed(res, STEP_READ, -EBUSY);
	if (!m.configured || (!m.in_firmware && m.state == MEM_STATE_OFFLINE)) {
		res->was_noop = true;
		return 0;
	}
	mem_zones_format(m.zones, zone, sizeof(zone));

	if (m.state == MEM_STATE_ONLINE) {
		/* W6, then C11 in one sequence (hp_write_seq()) */
		r = hp_write_seq(b, id, down, m.in_firmware ? 2 : 1, &done);
		if (done == 0 && r == -EINTR) {
			/* cut at the deadline: the kernel may have finished just
			 * before, and its word, not the write's, counts */
			struct mem_block now;

			if (hp_read_block(b, id, &now) == 0 && now.state == MEM_STATE_OFFLINE) {
				r = 0;
				done = 1;
			}
		}
		if (done == 0) {
			read_after(b, id, res);
			return failed(res, STEP_OFFLINE, r);
		}
		offlined = true;
		res->steps_done |= 1u << STEP_OFFLINE;
		deconfigured = done == 2;
	}
	if (m.in_firmware && !deconfigured) {
		if (r == 0) /* else the sequence's deconfigure failed */
			r = block_deconfigure(b, id); /* C11 */
		if (r < 0) {
			if (offlined && can_undo(r))
				keep_undo_err(res, block_online(b, id, type_for_zone(zone)));
			read_after(b, id, res);
			return failed(res, STEP_DECONFIGURE, r);
		}
	}
	if (m.in_firmware)
		res->steps_done |= 1u << STEP_DECONFIGURE;
	state_after(b, rd, id, m.in_firmware ? STEP_DECONFIGURE : STEP_OFFLINE, res);
	return 0;
}
