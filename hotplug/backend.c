/* SPDX-License-Identifier: MIT */
#include "hotplug/backend.h"
#include "lib/util.h"

void hp_backend_close(struct hp_backend *b)
{
	if (!b)
		return;
	hp_offline_writer_end(b);
	b->ops->close(b);
}

int block_set_memmap(struct hp_backend *b, uint64_t id, bool on)
{
	return b->ops->write_attr(b, HP_ATTR_MEMMAP, id, on ? "1" : "0");
}

int block_configure(struct hp_backend *b, uint64_t id)
{
	return b->ops->write_attr(b, HP_ATTR_CONFIG, id, "1");
}

int block_deconfigure(struct hp_backend *b, uint64_t id)
{
	return b->ops->write_attr(b, HP_ATTR_CONFIG, id, "0");
}

int block_online(struct hp_backend *b, uint64_t id, enum online_type type)
{
	return b->ops->write_attr(b, HP_ATTR_STATE, id, online_type_word(type));
}

int block_offline(struct hp_backend *b, uint64_t id)
{
	return hp_write_with_deadline(b, HP_ATTR_STATE, id, "offline",
				      b->has_write_deadline ? &b->write_deadline : NULL);
}

int hp_write_seq(struct hp_backend *b, uint64_t id, const struct hp_write *w, size_t n, size_t *done)
{
	*done = 0;
	if (n == 0 || n > HP_WRITE_SEQ_MAX)
		return -EINVAL;
	if (b->ops->write_seq)
		return b->ops->write_seq(b, id, w, n, done);
	for (; *done < n; (*done)++) {
		const struct hp_write *one = &w[*done];
		int r = one->attr == HP_ATTR_STATE && streq(one->value, "offline")
				? block_offline(b, id)
				: b->ops->write_attr(b, one->attr, id, one->value);

		if (r < 0)
			return r;
	}
	return 0;
}

int hp_set_auto_online(struct hp_backend *b, const char *policy)
{
	return b->ops->write_attr(b, HP_ATTR_AUTO_ONLINE, 0, policy);
}

int hp_set_write_deadline(struct hp_backend *b, const struct timespec *deadline)
{
	if (!b)
		return -EINVAL;
	if (b->ops->set_write_deadline)
		return b->ops->set_write_deadline(b, deadline);
	b->has_write_deadline = deadline != NULL;
	if (deadline)
		b->write_deadline = *deadline;
	return 0;
}

int hp_read_memmap(struct hp_backend *b, struct mem_block *rows, size_t n)
{
	int n_read = 0;

	for (size_t i = 0; i < n; i++) {
		struct mem_block m;
		int r;

		if (rows[i].memmap_on_memory != MEM_MEMMAP_UNREAD)
			continue;
		r = hp_reread(b, HP_REREAD_MEMMAP, &rows[i], &m);
		if (r == -EOPNOTSUPP)
			r = hp_read_block(b, rows[i].id, &m);
		if (r == -ESTALE || r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		rows[i].memmap_on_memory = m.memmap_on_memory;
		n_read++;
	}
	return n_read;
}
