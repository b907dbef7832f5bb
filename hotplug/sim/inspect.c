/* SPDX-License-Identifier: MIT */
/*
 * The sim's files looked at from outside, without a write: whether they
 * can be opened and parsed (memgrantd --check-config, memgrantctl), where
 * they may live, the machine they describe, the path of their tree.
 */
#include "hotplug/sim/sim.h"
#include "hotplug/sim/sim_impl.h"

#include "lib/util.h"

int sim_check_file(const char *state_path, char *err, size_t errlen)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_settings_ struct sim_settings *s = NULL;
	_cleanup_free_ struct sim_block *all = NULL;
	int r;

	if (err && errlen)
		err[0] = '\0';
	r = sim_fs_open(state_path, NULL, false, &fs, err, errlen);
	if (r == 0)
		r = sim_settings_load(fs, &s, err, errlen);
	if (r == 0)
		r = sim_records_load(s, &all, err, errlen);
	return r;
}

int sim_check_place(const char *state_path, const char *tree, char *err, size_t errlen)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_free_ char *deftree = NULL;

	if (!tree && asprintf(&deftree, "%s.tree", state_path) < 0)
		return -ENOMEM;
	return sim_fs_open(state_path, tree ? tree : deftree, false, &fs, err, errlen);
}

int sim_read_params(const char *state_path, struct sim_params *out)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_settings_ struct sim_settings *s = NULL;
	int r = sim_fs_open(state_path, NULL, false, &fs, NULL, 0);

	if (r == 0)
		r = sim_settings_load(fs, &s, NULL, 0);
	if (r < 0)
		return r;
	memset(out, 0, sizeof(*out));
	out->block_size = s->block_size;
	out->online_bytes = s->boot_blocks * s->block_size;
	out->standby_bytes = (s->n_blocks - s->boot_blocks) * s->block_size;
	out->memmap_supported = s->memmap_supported;
	out->has_firmware = s->has_firmware;
	return 0;
}

int sim_tree_path(const char *state_path, char **out)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	int r = sim_fs_open(state_path, NULL, false, &fs, NULL, 0);

	if (r < 0)
		return r;
	*out = TAKE_PTR(fs->tree_path);
	return 0;
}
