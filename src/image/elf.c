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
 * interpreter.  ET_EXEC programs need their link address, which only one
 * image could have: ENOEXEC, as for scripts, so that a caller runs them as
 * child processes.  Setuid and setgid programs: EPERM (a μprocess cannot
 * take other credentials than its host's).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "uproc.h"

#define PAGE 4096ul
#define PDOWN(x) ((x) & ~(PAGE - 1))
#define PUP(x) (((x) + PAGE - 1) & ~(PAGE - 1))

static int read_at(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	return n == (ssize_t)len ? 0 : ENOEXEC;
}

/* Map one ELF object; fills the image's base, entry and program headers. */
static int map_object(int fd, struct kr__elf_img *img)
{
	struct stat st;
	if (fstat(fd, &st))
		return ENOEXEC;
	img->file = kr__file_id_of(&st);
	Elf64_Ehdr eh;
	if (read_at(fd, &eh, sizeof eh, 0))
		return ENOEXEC;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
	    eh.e_type != ET_DYN || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
	    eh.e_phnum > 64)
		return ENOEXEC;
	Elf64_Phdr ph[64];
	if (read_at(fd, ph, eh.e_phnum * sizeof *ph, (off_t)eh.e_phoff))
		return ENOEXEC;

	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (ph[i].p_filesz > ph[i].p_memsz ||
		    (ph[i].p_vaddr & (PAGE - 1)) != (ph[i].p_offset & (PAGE - 1)))
			return ENOEXEC;
		if (PDOWN(ph[i].p_vaddr) < lo)
			lo = PDOWN(ph[i].p_vaddr);
		if (PUP(ph[i].p_vaddr + ph[i].p_memsz) > hi)
			hi = PUP(ph[i].p_vaddr + ph[i].p_memsz);
	}
	if (lo >= hi || hi - lo > (1ul << 36))
		return ENOEXEC;

	/* One reservation for the whole span, so that the segments keep their
	 * distances and nothing else lands in the holes between them. */
	unsigned char *span = mmap(NULL, hi - lo, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (span == MAP_FAILED)
		return ENOMEM;
	uint64_t base = (uint64_t)span - lo;
	img->map = span;
	img->maplen = hi - lo;
	img->base = base;
	img->entry = base + eh.e_entry;
	img->phnum = eh.e_phnum;
	img->phdr = 0;
	img->xlo = img->xhi = 0;

	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr *p = &ph[i];
		if (p->p_type == PT_PHDR)
			img->phdr = base + p->p_vaddr;
		if (p->p_type != PT_LOAD)
			continue;
		int prot = (p->p_flags & PF_R ? PROT_READ : 0) |
			   (p->p_flags & PF_W ? PROT_WRITE : 0) | (p->p_flags & PF_X ? PROT_EXEC : 0);
		uint64_t va = base + PDOWN(p->p_vaddr);
		uint64_t fileend = base + p->p_vaddr + p->p_filesz;
		uint64_t memend = base + p->p_vaddr + p->p_memsz;
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
			if (p->p_filesz && (fileend & (PAGE - 1))) {
				if (!(prot & PROT_WRITE))
					goto fail;
				memset((void *)fileend, 0, PUP(fileend) - fileend);
			}
			uint64_t anon = p->p_filesz ? PUP(fileend) : va;
			if (memend > anon &&
			    mmap((void *)anon, PUP(memend) - anon, prot,
				 MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
				goto nomem;
		}
		/* the program headers live in the first segment that covers them */
		if (!img->phdr && eh.e_phoff >= p->p_offset &&
		    eh.e_phoff + eh.e_phnum * sizeof *ph <= p->p_offset + p->p_filesz)
			img->phdr = base + p->p_vaddr + (eh.e_phoff - p->p_offset);
	}
	if (!img->phdr)
		goto fail;
	return 0;
nomem: /* out of memory or mappings: not the program's fault */
	munmap(span, hi - lo);
	img->map = NULL;
	return ENOMEM;
fail:
	munmap(span, hi - lo);
	img->map = NULL;
	return ENOEXEC;
}

/* The path of the object's interpreter, if it has one ("" if not). */
static int interp_of(int fd, char *out, size_t cap)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	out[0] = 0;
	if (read_at(fd, &eh, sizeof eh, 0) || eh.e_phnum > 64 ||
	    read_at(fd, ph, eh.e_phnum * sizeof *ph, (off_t)eh.e_phoff))
		return ENOEXEC;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_INTERP) {
			if (ph[i].p_filesz == 0 || ph[i].p_filesz >= cap ||
			    read_at(fd, out, ph[i].p_filesz, (off_t)ph[i].p_offset))
				return ENOEXEC;
			out[ph[i].p_filesz] = 0;
			if (strlen(out) != ph[i].p_filesz - 1)
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

int kr__elf_load(int dirfd, const char *path, struct kr__elf_load *ld)
{
	memset(ld, 0, sizeof *ld);
	int fd = -1, err = open_program(dirfd, path, &fd);
	if (err)
		return err;
	char interp[256];
	err = interp_of(fd, interp, sizeof interp);
	if (!err)
		err = map_object(fd, &ld->prog);
	close(fd);
	if (err)
		return err;
	if (interp[0]) {
		int ifd = open(interp, O_RDONLY | O_CLOEXEC);
		err = ifd < 0 ? (errno == EMFILE || errno == ENFILE || errno == ENOMEM ? errno : ENOEXEC)
			      : map_object(ifd, &ld->interp);
		if (ifd >= 0)
			close(ifd);
		if (err) {
			kr__elf_unload(ld);
			return err;
		}
	}
	return 0;
}

void kr__elf_unload(struct kr__elf_load *ld)
{
	if (ld->prog.map)
		munmap(ld->prog.map, ld->prog.maplen);
	if (ld->interp.map)
		munmap(ld->interp.map, ld->interp.maplen);
	ld->prog.map = ld->interp.map = NULL;
}
