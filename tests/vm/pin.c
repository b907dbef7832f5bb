/* SPDX-License-Identifier: MIT */
/*
 * pin: puts unmovable kernel memory (page tables) into a memory block of
 * the VM test guest, so that offlining the block fails (EBUSY: the kernel
 * cannot isolate a range holding unmovable pages).  Runs inside the guest
 * only; built -static so the initramfs needs nothing else for it.
 *
 *   pin BLOCK_ID [TABLES]
 *   pin --count BLOCK_ID      only count (what is left once the pin is gone)
 *
 * It reads one byte every 2 MiB of a large sparse private mapping: each read
 * maps the shared zero page and makes the kernel allocate a page-table page
 * (GFP_KERNEL, unmovable).  On x86 with all boot memory below 4 GiB, a block
 * onlined with online_kernel is the only ZONE_NORMAL memory, which GFP_KERNEL
 * prefers, so the tables land there.  /proc/kpageflags (bits KPF_SLAB,
 * KPF_PGTABLE) counts how many unmovable pages the block now holds.
 * Prints "pin: block N holds P page-table and S slab pages", then waits
 * until killed (the tables live as long as the process).  Exit 1 when the
 * block got none.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KPF_SLAB 7
#define KPF_PGTABLE 26
#define STRIDE (2UL << 20) /* one last-level page table maps 2 MiB */

static int read_block_size(uint64_t *bs)
{
	FILE *f = fopen("/sys/devices/system/memory/block_size_bytes", "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%" SCNx64, bs) == 1;
	fclose(f);
	return ok && *bs ? 0 : -EINVAL;
}

/* Counts page-table and slab pages among the block's page frames. */
static int count_unmovable(uint64_t first_pfn, uint64_t n, uint64_t *pgtable, uint64_t *slab)
{
	int fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	uint64_t buf[512];

	if (fd < 0)
		return -errno;
	*pgtable = *slab = 0;
	for (uint64_t done = 0; done < n;) {
		size_t want = n - done < 512 ? (size_t)(n - done) : 512;
		ssize_t r = pread(fd, buf, want * 8, (off_t)((first_pfn + done) * 8));

		if (r <= 0) {
			int e = r < 0 ? -errno : -EIO;
			close(fd);
			return e;
		}
		for (ssize_t i = 0; i < r / 8; i++) {
			*pgtable += (buf[i] >> KPF_PGTABLE) & 1;
			*slab += (buf[i] >> KPF_SLAB) & 1;
		}
		done += (uint64_t)r / 8;
	}
	close(fd);
	return 0;
}

/* Counts and prints the block's unmovable pages. */
static int report(uint64_t id, uint64_t bs, uint64_t page, uint64_t *pgtable, uint64_t *slab)
{
	int r = count_unmovable(id * bs / page, bs / page, pgtable, slab);

	if (r < 0) {
		fprintf(stderr, "pin: /proc/kpageflags: %s\n", strerror(-r));
		return r;
	}
	printf("pin: block %" PRIu64 " holds %" PRIu64 " page-table and %" PRIu64 " slab pages\n",
	       id, *pgtable, *slab);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t bs, id, tables = 8192, pgtable, slab;
	long page = sysconf(_SC_PAGESIZE);
	char *end;
	int r;

	bool count_only = argc == 3 && strcmp(argv[1], "--count") == 0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: pin BLOCK_ID [TABLES] | pin --count BLOCK_ID\n");
		return 2;
	}
	if (count_only) {
		argv++;
		argc--;
	}
	errno = 0;
	id = strtoull(argv[1], &end, 10);
	if (errno || *end || end == argv[1]) {
		fprintf(stderr, "pin: bad block id '%s'\n", argv[1]);
		return 2;
	}
	if (argc == 3) {
		tables = strtoull(argv[2], &end, 10);
		if (*end || tables == 0) {
			fprintf(stderr, "pin: bad table count '%s'\n", argv[2]);
			return 2;
		}
	}
	r = read_block_size(&bs);
	if (r < 0) {
		fprintf(stderr, "pin: block_size_bytes: %s\n", strerror(-r));
		return 1;
	}

	if (count_only)
		return report(id, bs, (uint64_t)page, &pgtable, &slab) < 0 ? 1 : 0;

	volatile char *area = mmap(NULL, tables * STRIDE, PROT_READ,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED) {
		fprintf(stderr, "pin: mmap: %s\n", strerror(errno));
		return 1;
	}
	for (uint64_t i = 0; i < tables; i++)
		(void)area[i * STRIDE];

	if (report(id, bs, (uint64_t)page, &pgtable, &slab) < 0 || pgtable + slab == 0)
		return 1;
	for (;;)
		pause();
}
