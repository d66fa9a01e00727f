/*
 * karui-sh's variables: shell variables, which of them are exported, and
 * the environment a command gets.
 *
 * The variables are one array sorted by name (binary search): a shell
 * holds tens of them, and `export -p` wants them sorted anyway.  The
 * environment karui-sh starts with becomes exported variables (names
 * that are not valid identifiers are dropped, as bash does); NAME=value
 * makes or changes a shell variable, which stays exported if it was;
 * `export` marks one.  A command's environment is built afresh for each
 * command from the exported variables that have a value, its own
 * NAME=value prefix assignments overriding them: the environment is a
 * function of the shell's state, never a second copy of it that could
 * drift.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shell.h"

void ksh_strv_push(struct ksh_strv *v, char *s)
{
	if (v->n + 2 > v->cap) {
		v->cap = v->cap ? 2 * v->cap : 8;
		v->v = ksh_xrealloc(v->v, v->cap * sizeof *v->v);
	}
	v->v[v->n++] = s;
	v->v[v->n] = NULL;
}

void ksh_strv_free(struct ksh_strv *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
	*v = (struct ksh_strv){0};
}

/* The index of name, or where it would go (*found false). */
static size_t find(const struct shell *sh, const char *name, size_t len, bool *found)
{
	size_t lo = 0, hi = sh->nvars;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const char *m = sh->vars[mid].name;
		int c = strncmp(m, name, len);
		if (c == 0)
			c = m[len] ? 1 : 0;
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct ksh_var *lookup(const struct shell *sh, const char *name, size_t len)
{
	bool found;
	size_t i = find(sh, name, len, &found);
	return found ? &sh->vars[i] : NULL;
}

const char *ksh_var_get(const struct shell *sh, const char *name)
{
	const struct ksh_var *v = lookup(sh, name, strlen(name));
	return v ? v->value : NULL;
}

static void set(struct shell *sh, const char *name, size_t len, const char *value, bool export)
{
	bool found;
	size_t i = find(sh, name, len, &found);
	if (!found) {
		if (sh->nvars == sh->capvars) {
			sh->capvars = sh->capvars ? 2 * sh->capvars : 32;
			sh->vars = ksh_xrealloc(sh->vars, sh->capvars * sizeof *sh->vars);
		}
		memmove(&sh->vars[i + 1], &sh->vars[i], (sh->nvars - i) * sizeof *sh->vars);
		sh->nvars++;
		char *n = ksh_xmalloc(len + 1);
		memcpy(n, name, len);
		n[len] = 0;
		sh->vars[i] = (struct ksh_var){.name = n};
	}
	struct ksh_var *v = &sh->vars[i];
	if (value) {
		free(v->value);
		v->value = ksh_xstrdup(value);
	}
	v->exported |= export;
}

void ksh_var_set(struct shell *sh, const char *name, const char *value, bool export)
{
	set(sh, name, strlen(name), value, export);
}

void ksh_var_save(const struct shell *sh, const char *name, struct ksh_var_saved *sv)
{
	const struct ksh_var *v = lookup(sh, name, strlen(name));
	*sv = (struct ksh_var_saved){.name = ksh_xstrdup(name), .existed = v != NULL,
				     .exported = v && v->exported,
				     .value = v && v->value ? ksh_xstrdup(v->value) : NULL};
}

void ksh_var_restore(struct shell *sh, struct ksh_var_saved *sv)
{
	bool found;
	size_t i = find(sh, sv->name, strlen(sv->name), &found);
	if (found) {
		free(sh->vars[i].name);
		free(sh->vars[i].value);
		memmove(&sh->vars[i], &sh->vars[i + 1], (sh->nvars - i - 1) * sizeof *sh->vars);
		sh->nvars--;
	}
	if (sv->existed)
		ksh_var_set(sh, sv->name, sv->value, sv->exported);
	free(sv->name);
	free(sv->value);
}

void ksh_var_unset(struct shell *sh, const char *name)
{
	bool found;
	size_t i = find(sh, name, strlen(name), &found);
	if (!found)
		return;
	free(sh->vars[i].name);
	free(sh->vars[i].value);
	memmove(&sh->vars[i], &sh->vars[i + 1], (sh->nvars - i - 1) * sizeof *sh->vars);
	sh->nvars--;
}

void ksh_vars_import(struct shell *sh, char **environ)
{
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (eq && ksh_valid_name(*e, (size_t)(eq - *e)))
			set(sh, *e, (size_t)(eq - *e), eq + 1, true);
	}
}

void ksh_vars_free(struct shell *sh)
{
	for (size_t i = 0; i < sh->nvars; i++) {
		free(sh->vars[i].name);
		free(sh->vars[i].value);
	}
	free(sh->vars);
	sh->vars = NULL;
	sh->nvars = sh->capvars = 0;
}

void ksh_vars_print_exported(const struct shell *sh, int fd)
{
	for (size_t i = 0; i < sh->nvars; i++) {
		const struct ksh_var *v = &sh->vars[i];
		if (!v->exported)
			continue;
		size_t len = strlen(v->name) + 16 + (v->value ? 2 * strlen(v->value) : 0);
		char *line = ksh_xmalloc(len), *p = line;
		p += sprintf(p, "declare -x %s", v->name);
		if (v->value) {
			*p++ = '=';
			*p++ = '"';
			for (const char *c = v->value; *c; c++) {
				if (strchr("\"\\$`", *c))
					*p++ = '\\';
				*p++ = *c;
			}
			*p++ = '"';
		}
		*p++ = '\n';
		ksh_write_all(fd, line, (size_t)(p - line));
		free(line);
	}
}

void ksh_environ(const struct shell *sh, const struct ksh_strv *assign, struct ksh_strv *out)
{
	*out = (struct ksh_strv){.v = ksh_xmalloc(8 * sizeof(char *)), .cap = 8};
	out->v[0] = NULL; /* an environment even when empty */
	for (size_t i = 0; i < sh->nvars; i++) {
		const struct ksh_var *v = &sh->vars[i];
		if (!v->exported || !v->value)
			continue;
		size_t nl = strlen(v->name), overridden = 0;
		for (size_t j = 0; j < assign->n && !overridden; j++)
			overridden = strncmp(assign->v[j], v->name, nl) == 0 && assign->v[j][nl] == '=';
		if (overridden)
			continue;
		char *e = ksh_xmalloc(nl + strlen(v->value) + 2);
		sprintf(e, "%s=%s", v->name, v->value);
		ksh_strv_push(out, e);
	}
	for (size_t j = 0; j < assign->n; j++) {
		const char *eq = strchr(assign->v[j], '=');
		bool later = false; /* the last assignment to a name wins */
		for (size_t k = j + 1; k < assign->n && !later; k++)
			later = strncmp(assign->v[k], assign->v[j], (size_t)(eq - assign->v[j]) + 1) == 0;
		if (!later)
			ksh_strv_push(out, ksh_xstrdup(assign->v[j]));
	}
}
