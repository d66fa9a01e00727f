/*
 * karui image layer — loading an ELF program as a private image.
 *
 * A μprocess is started the way the kernel starts a program (execve):
 * the program's PT_LOAD segments are mapped at a fresh base, its
 * interpreter (PT_INTERP: the system's ld.so) likewise, and the initial
 * stack holds argc, argv, envp and the auxiliary vector naming both.  The
 * μprocess's own ld.so then loads its libraries and a private C library
 * through system calls that karui intercepts (uproc.c): nothing is
 * prepared ahead of time, so no cache is needed.
 *
 * Segments are mapped from the file with MAP_PRIVATE, so read-only pages
 * (text, rodata) are the page cache's and shared by every μprocess of the
 * same file, as by processes; written pages are the μprocess's own.
 *
 * Loadable: ET_DYN x86-64 programs (PIE, static-PIE) and their
 * interpreter, anywhere; ET_EXEC programs (not PIE: Debian's python3 and
 * node) at their link address, which only one image at a time can have
 * and which the host may hold: the span is reserved there with
 * MAP_FIXED_NOREPLACE, and EADDRINUSE when anything lies in it, so that a
 * caller runs the program as a child process instead.  Their base is 0,
 * which rewrite.c takes for "no image to read" (their own call sites stay
 * trapped; their libraries', PIE, are rewritten).  Setuid and setgid
 * programs: EPERM (a μprocess cannot take other credentials than its
 * host's).
 *
 * The file is untrusted: the μprocess runs in the host's address space,
 * and karui itself reads the image (the ELF and program headers, the
 * unwind table and the text: rewrite.c, reuse.c).  So the headers of the
 * program and of its interpreter are read with pread into buffers and
 * checked before anything is mapped (check_object): every offset and size
 * within the file, no sum overflowing, PT_LOAD segments in order, with
 * p_filesz <= p_memsz and p_vaddr and p_offset alike modulo the page, a
 * span of at most 64 GiB, the entry inside the file part of an executable
 * segment, and what is read from the image in memory (the ELF and program
 * headers at base + their offsets, PT_PHDR, PT_DYNAMIC, PT_GNU_EH_FRAME,
 * PT_GNU_PROPERTY, PT_TLS's initial image) inside the file part of a
 * readable segment, at the offset the file has it.  PT_INTERP is one
 * absolute path of less than 256 bytes, NUL-terminated, within the file.
 * Any failure, a file cut short included, is ENOEXEC (EIO and the like:
 * the file could not be read), and no mapped page lies past the file's
 * end.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "uproc.h"

#define PAGE 4096ul
#define PDOWN(x) ((x) & ~(PAGE - 1))
#define PUP(x) (((x) + PAGE - 1) & ~(PAGE - 1))
#define MAXPH 64
#define MAXSPAN (1ul << 36)
#define MAXVA (1ul << 47)
#define MIN_FIXED 0x10000ul /* below: vm.mmap_min_addr's default */

/* An object's headers, as read from its file and checked. */
struct object {
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAXPH];
	uint64_t size; /* of the file */
	struct kr__file_id file;
	uint64_t hdr; /* the address its first PT_LOAD gives file offset 0: 0 for
	                 PIE, the link address for ET_EXEC */
};

/* 0; ENOEXEC if the file is shorter; errno if it cannot be read. */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);
	return n < 0 ? errno : (size_t)n == len ? 0 : ENOEXEC;
}

/* [off, off + len) of the file lies inside the file part of a readable
 * PT_LOAD, which maps it at [vaddr, vaddr + len). */
static int in_file_part(const struct object *o, uint64_t vaddr, uint64_t off, uint64_t len)
{
	for (int i = 0; i < o->eh.e_phnum; i++) {
		const Elf64_Phdr *p = &o->ph[i];
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_R) || vaddr < p->p_vaddr ||
		    off < p->p_offset || len > p->p_filesz)
			continue;
		if (vaddr - p->p_vaddr == off - p->p_offset && vaddr - p->p_vaddr <= p->p_filesz - len)
			return 1;
	}
	return 0;
}

/* The entry lies in the file part of an executable PT_LOAD. */
static int entry_ok(const struct object *o)
{
	for (int i = 0; i < o->eh.e_phnum; i++) {
		const Elf64_Phdr *p = &o->ph[i];
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && o->eh.e_entry >= p->p_vaddr &&
		    o->eh.e_entry - p->p_vaddr < p->p_filesz)
			return 1;
	}
	return 0;
}

/* Read the ELF and program headers of the object open at fd and check
 * them against each other and the file's size (the design comment). */
static int check_object(int fd, struct object *o, int program)
{
	struct stat st;
	if (fstat(fd, &st))
		return errno;
	o->size = (uint64_t)st.st_size;
	o->file = kr__file_id_of(&st);
	Elf64_Ehdr *eh = &o->eh;
	int err = read_at(fd, eh, sizeof *eh, 0);
	if (err)
		return err;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_ident[EI_VERSION] != EV_CURRENT ||
	    eh->e_version != EV_CURRENT || eh->e_machine != EM_X86_64 ||
	    !(eh->e_type == ET_DYN || (program && eh->e_type == ET_EXEC)) ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum > MAXPH ||
	    eh->e_phoff % 8 || eh->e_phoff > o->size ||
	    o->size - eh->e_phoff < eh->e_phnum * sizeof(Elf64_Phdr))
		return ENOEXEC;
	if ((err = read_at(fd, o->ph, eh->e_phnum * sizeof(Elf64_Phdr), eh->e_phoff)))
		return err;

	uint64_t end = 0;
	int loads = 0, interps = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &o->ph[i];
		if (p->p_type == PT_INTERP && interps++)
			return ENOEXEC;
		if (p->p_type != PT_LOAD)
			continue;
		if (!loads && p->p_offset > p->p_vaddr)
			return ENOEXEC;
		if (!loads)
			o->hdr = p->p_vaddr - p->p_offset;
		if (p->p_filesz > p->p_memsz || p->p_offset > o->size ||
		    p->p_filesz > o->size - p->p_offset || p->p_vaddr > MAXVA ||
		    p->p_memsz > MAXVA - p->p_vaddr || (p->p_align & (p->p_align - 1)) ||
		    (p->p_vaddr & (PAGE - 1)) != (p->p_offset & (PAGE - 1)) ||
		    (loads && p->p_vaddr < end))
			return ENOEXEC;
		/* a bss that starts inside a file page is zeroed there */
		if (p->p_filesz && p->p_memsz > p->p_filesz &&
		    ((p->p_vaddr + p->p_filesz) & (PAGE - 1)) && !(p->p_flags & PF_W))
			return ENOEXEC;
		end = p->p_vaddr + p->p_memsz;
		loads++;
	}
	if (!loads || !entry_ok(o) ||
	    !in_file_part(o, o->hdr, 0, sizeof *eh) ||
	    !in_file_part(o, o->hdr + eh->e_phoff, eh->e_phoff, eh->e_phnum * sizeof(Elf64_Phdr)))
		return ENOEXEC;

	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &o->ph[i];
		switch (p->p_type) {
		case PT_PHDR:
			if (p->p_offset != eh->e_phoff ||
			    p->p_filesz != eh->e_phnum * sizeof(Elf64_Phdr))
				return ENOEXEC;
			/* fall through */
		case PT_DYNAMIC:
		case PT_GNU_EH_FRAME:
		case PT_GNU_PROPERTY:
			if (p->p_filesz != p->p_memsz)
				return ENOEXEC;
			/* fall through */
		case PT_TLS: /* its initial image; none if only .tbss */
			if (p->p_filesz > p->p_memsz ||
			    ((p->p_filesz || p->p_type != PT_TLS) &&
			     !in_file_part(o, p->p_vaddr, p->p_offset, p->p_filesz)))
				return ENOEXEC;
			break;
		case PT_INTERP:
			if (p->p_offset > o->size || p->p_filesz > o->size - p->p_offset)
				return ENOEXEC;
			break;
		}
	}
	return 0;
}

/* Map one checked object; fills the image's base, entry and program
 * headers. */
static int map_object(int fd, const struct object *o, struct kr__elf_img *img)
{
	const Elf64_Phdr *ph = o->ph;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < o->eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !ph[i].p_memsz)
			continue;
		if (PDOWN(ph[i].p_vaddr) < lo)
			lo = PDOWN(ph[i].p_vaddr);
		if (PUP(ph[i].p_vaddr + ph[i].p_memsz) > hi)
			hi = PUP(ph[i].p_vaddr + ph[i].p_memsz);
	}
	int fixed = o->eh.e_type == ET_EXEC;
	if (lo >= hi || hi - lo > MAXSPAN || (fixed && lo < MIN_FIXED))
		return ENOEXEC;

	/* One reservation for the whole span, so that the segments keep their
	 * distances and nothing else lands in the holes between them; at the
	 * link address for ET_EXEC, over nothing */
	unsigned char *span = mmap(fixed ? (void *)lo : NULL, hi - lo, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
					   (fixed ? MAP_FIXED_NOREPLACE : 0),
				   -1, 0);
	if (span == MAP_FAILED)
		return fixed && errno == EEXIST ? EADDRINUSE : ENOMEM;
	if (fixed && (uint64_t)span != lo) { /* a kernel that took it as a hint */
		munmap(span, hi - lo);
		return EADDRINUSE;
	}
	uint64_t base = (uint64_t)span - lo;
	img->map = span;
	img->maplen = hi - lo;
	img->base = base;
	img->entry = base + o->eh.e_entry;
	img->phnum = o->eh.e_phnum;
	img->phdr = base + o->hdr + o->eh.e_phoff;
	img->xlo = img->xhi = 0;
	img->file = o->file;

	for (int i = 0; i < o->eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		if (p->p_type == PT_PHDR)
			img->phdr = base + p->p_vaddr;
		if (p->p_type != PT_LOAD || !p->p_memsz)
			continue;
		int prot = (p->p_flags & PF_R ? PROT_READ : 0) |
			   (p->p_flags & PF_W ? PROT_WRITE : 0) | (p->p_flags & PF_X ? PROT_EXEC : 0);
		uint64_t va = base + PDOWN(p->p_vaddr);
		uint64_t fileend = base + p->p_vaddr + p->p_filesz;
		uint64_t memend = base + p->p_vaddr + p->p_memsz;
		/* every page mapped holds a byte of the file: none lies past its end */
		if (p->p_filesz &&
		    mmap((void *)va, PUP(fileend) - va, prot, MAP_PRIVATE | MAP_FIXED, fd,
			 (off_t)PDOWN(p->p_offset)) == MAP_FAILED)
			goto nomem;
		if ((prot & PROT_EXEC) && p->p_filesz && !img->xlo) {
			img->xlo = va;
			img->xhi = PUP(fileend);
		}
		if (memend > fileend) {
			/* bss: the tail of the last file page reads as zeros, the rest
			 * is anonymous memory */
			if (p->p_filesz && (fileend & (PAGE - 1)))
				memset((void *)fileend, 0, PUP(fileend) - fileend);
			uint64_t anon = p->p_filesz ? PUP(fileend) : va;
			if (memend > anon &&
			    mmap((void *)anon, PUP(memend) - anon, prot,
				 MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
				goto nomem;
		}
	}
	return 0;
nomem: /* out of memory or mappings: not the program's fault */
	munmap(span, hi - lo);
	img->map = NULL;
	return ENOMEM;
}

/* The path of the object's interpreter, if it has one ("" if not): an
 * absolute path, NUL-terminated, of less than cap bytes. */
static int interp_of(int fd, const struct object *o, char *out, size_t cap)
{
	out[0] = 0;
	for (int i = 0; i < o->eh.e_phnum; i++) {
		const Elf64_Phdr *p = &o->ph[i];
		if (p->p_type != PT_INTERP)
			continue;
		if (p->p_filesz < 2 || p->p_filesz > cap)
			return ENOEXEC;
		int err = read_at(fd, out, p->p_filesz, p->p_offset);
		if (err)
			return err;
		if (out[0] != '/' || strnlen(out, p->p_filesz) != p->p_filesz - 1)
			return ENOEXEC;
	}
	return 0;
}

/* Open what execve would run at dirfd/path; the checks execve makes, then
 * karui's own. */
static int open_program(int dirfd, const char *path, int *out)
{
	if (faccessat(dirfd, path, X_OK, AT_EACCESS))
		return errno;
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		close(fd);
		return EACCES;
	}
	if (st.st_mode & (S_ISUID | S_ISGID) || fgetxattr(fd, KR__CAPS_XATTR, NULL, 0) > 0) {
		close(fd);
		return EPERM;
	}
	*out = fd;
	return 0;
}

/* Check and map the interpreter at path, its headers read into o. */
static int load_interp(const char *path, struct object *o, struct kr__elf_img *img)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? errno : ENOEXEC;
	int err = check_object(fd, o, 0);
	if (!err)
		err = map_object(fd, o, img);
	close(fd);
	return err;
}

int kr__elf_load(int dirfd, const char *path, struct kr__elf_load *ld)
{
	memset(ld, 0, sizeof *ld);
	int fd = -1, err = open_program(dirfd, path, &fd);
	if (err)
		return err;
	char interp[256];
	struct object o;
	err = check_object(fd, &o, 1);
	if (!err)
		err = interp_of(fd, &o, interp, sizeof interp);
	if (!err)
		err = map_object(fd, &o, &ld->prog);
	close(fd);
	if (!err && interp[0] && (err = load_interp(interp, &o, &ld->interp)))
		kr__elf_unload(ld);
	return err;
}

void kr__elf_unload(struct kr__elf_load *ld)
{
	if (ld->prog.map)
		munmap(ld->prog.map, ld->prog.maplen);
	if (ld->interp.map)
		munmap(ld->interp.map, ld->interp.maplen);
	ld->prog.map = ld->interp.map = NULL;
}
