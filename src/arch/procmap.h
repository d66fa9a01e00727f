/* karui — PROCMAP_QUERY (Linux 6.11): one mapping of the process, asked by
 * address on an fd of /proc/self/maps, instead of the whole text of that
 * file, which the kernel writes line by line for every mapping.  The
 * kernel's definitions, for headers older than 6.11. */
#ifndef KARUI_ARCH_PROCMAP_H
#define KARUI_ARCH_PROCMAP_H

#include <linux/fs.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_VMA_SHARED 0x08
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif

#endif
