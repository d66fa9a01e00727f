/*
 * karui-sh's input: where command lines come from, a line at a time.
 *
 *   a string     -c LINE, or what eval, ., a trap or a command
 *                substitution runs: its lines, read in place;
 *   a file       a script: read in blocks (no command shares its fd);
 *   stdin        no terminal: read a byte at a time, as bash does, so that
 *                a command reads exactly what follows its own line
 *                (`karui-sh <<< $'cat\nhello'` gives hello to cat);
 *   a terminal   a prompt ($PS1, or "karui-sh$ "; $PS2 or "> " for a
 *                command's further lines), with line editing and history
 *                when karui-sh was built with libedit's header
 *                (KSH_HAVE_LIBEDIT) and the library loads, else the prompt
 *                on stderr and a plain read.
 *
 * libedit is loaded (dlopen) only for a terminal: linked in, its four
 * libraries cost every karui-sh a quarter of a millisecond at start, for
 * `-c` and scripts too, which never edit a line.
 *
 * NUL bytes are dropped from every input, as bash drops them; a file
 * whose start shows it to be binary (ksh_binary_file, bash's test) is no
 * script at all.
 *
 * Lines are read when no stage runs, on the main microprocess; a read
 * from a terminal or pipe blocks its VP, which has nothing else to run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if KSH_HAVE_LIBEDIT
#include <dlfcn.h>
#include <editline/readline.h>

static struct {
	char *(*readline)(const char *);
	int (*add_history)(const char *);
} edit;

/* libedit's calls, if its library loads; else plain reads. */
static void load_libedit(void)
{
	void *h = dlopen("libedit.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	void (*using)(void) = (void (*)(void))dlsym(h, "using_history");
	edit.readline = (char *(*)(const char *))dlsym(h, "readline");
	edit.add_history = (int (*)(const char *))dlsym(h, "add_history");
	if (!using || !edit.readline || !edit.add_history) {
		edit.readline = NULL;
		return;
	}
	using();
}
#endif

#include "shell.h"

enum kind { IN_STRING, IN_FD, IN_TERMINAL };

struct ksh_input {
	enum kind kind;
	const char *s;       /* IN_STRING */
	size_t pos, len;
	int fd;              /* IN_FD, and IN_TERMINAL without libedit */
	bool unbuffered;
	char buf[4096];
	size_t bpos, blen;
	char *line;          /* the line handed out, when not in place */
	size_t cap;
	struct shell *sh;    /* IN_TERMINAL: the prompts */
};

static struct ksh_input *make(enum kind kind)
{
	struct ksh_input *in = ksh_xmalloc(sizeof *in);
	*in = (struct ksh_input){.kind = kind, .fd = -1};
	return in;
}

struct ksh_input *ksh_input_string(const char *s)
{
	struct ksh_input *in = make(IN_STRING);
	in->s = s;
	in->len = strlen(s);
	return in;
}

struct ksh_input *ksh_input_mem(const char *s, size_t len)
{
	struct ksh_input *in = make(IN_STRING);
	in->s = s;
	in->len = len;
	return in;
}

struct ksh_input *ksh_input_fd(int fd, bool unbuffered)
{
	struct ksh_input *in = make(IN_FD);
	in->fd = fd;
	in->unbuffered = unbuffered;
	return in;
}

struct ksh_input *ksh_input_terminal(struct shell *sh)
{
	struct ksh_input *in = make(IN_TERMINAL);
	in->sh = sh;
	in->fd = 0;
	in->unbuffered = true;
#if KSH_HAVE_LIBEDIT
	load_libedit();
#endif
	return in;
}

static void keep(struct ksh_input *in, size_t n, char c)
{
	if (n + 2 > in->cap) {
		in->cap = in->cap ? 2 * in->cap : 256;
		in->line = ksh_xrealloc(in->line, in->cap);
	}
	in->line[n] = c;
}

/* One byte of the fd; 0 at its end (or on an error, which ends it too). */
static int next_byte(struct ksh_input *in, char *c)
{
	if (in->bpos == in->blen) {
		ssize_t n;
		do
			n = read(in->fd, in->buf, in->unbuffered ? 1 : sizeof in->buf);
		while (n < 0 && errno == EINTR);
		if (n <= 0)
			return 0;
		in->bpos = 0;
		in->blen = (size_t)n;
	}
	*c = in->buf[in->bpos++];
	return 1;
}

static const char *read_fd_line(struct ksh_input *in, size_t *len)
{
	size_t n = 0;
	char c;
	while (next_byte(in, &c)) {
		if (!c)
			continue;
		keep(in, n++, c);
		if (c == '\n')
			break;
	}
	*len = n;
	return n ? in->line : NULL;
}

static const char *prompt(const struct ksh_input *in, bool continuation)
{
	const char *p = ksh_var_get(in->sh, continuation ? "PS2" : "PS1");
	return p ? p : continuation ? "> " : "karui-sh$ ";
}

static const char *read_terminal_line(struct ksh_input *in, bool continuation, size_t *len)
{
#if KSH_HAVE_LIBEDIT
	if (!edit.readline)
		goto plain;
	char *l = edit.readline(prompt(in, continuation));
	if (!l)
		return NULL;
	if (*l)
		edit.add_history(l);
	size_t n = strlen(l);
	for (size_t i = 0; i < n; i++)
		keep(in, i, l[i]);
	keep(in, n, '\n');
	free(l);
	*len = n + 1;
	return in->line;
plain:
#endif
	;
	const char *p = prompt(in, continuation);
	ksh_write_all(2, p, strlen(p));
	return read_fd_line(in, len);
}

const char *ksh_input_line(struct ksh_input *in, bool continuation, size_t *len)
{
	switch (in->kind) {
	case IN_STRING: {
		if (in->pos == in->len)
			return NULL;
		const char *start = in->s + in->pos;
		const char *nl = memchr(start, '\n', in->len - in->pos);
		*len = nl ? (size_t)(nl - start) + 1 : in->len - in->pos;
		in->pos += *len;
		return start;
	}
	case IN_FD:
		return read_fd_line(in, len);
	default:
		return read_terminal_line(in, continuation, len);
	}
}

bool ksh_binary_file(int fd)
{
	char s[80];
	ssize_t n = pread(fd, s, sizeof s, 0);
	if (n >= 4 && memcmp(s, "\x7f" "ELF", 4) == 0)
		return true;
	int lines = n >= 2 && s[0] == '#' && s[1] == '!' ? -1 : 1;
	for (ssize_t i = 0; i < n; i++) {
		if (s[i] == '\n' && --lines == 0)
			return false;
		if (!s[i])
			return true;
	}
	return false;
}

void ksh_input_free(struct ksh_input *in)
{
	if (in->kind == IN_FD && in->fd > 2)
		close(in->fd);
	free(in->line);
	free(in);
}
