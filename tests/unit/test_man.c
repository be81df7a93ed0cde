/* The manual: every function of cadre.h has a page whose SYNOPSIS gives its
 * prototype as the header does, every page lints clean with mandoc, every
 * page is listed for installation, cadre-env(7) lists every tunable of the
 * config table, and the pages of section 7 (cadre(7) and its topics) name each
 * other and stay short enough to skim. And the README: its Quick start is what
 * .ci/run runs. */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* The whole file, NUL-terminated and malloc'ed; NULL when it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Appends printf-style text to a growing message (one report per test). */
static void addf(char **msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(char **msg, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    size_t old = *msg ? strlen(*msg) : 0;
    char *m = n < 0 ? NULL : realloc(*msg, old + (size_t)n + 1);
    if (m) {
        vsnprintf(m + old, (size_t)n + 1, fmt, ap2);
        *msg = m;
    }
    va_end(ap2);
}

/* Removes every character that is white space: prototypes are compared
 * without it, so that line breaks and alignment do not matter. */
static void strip_space(char *s)
{
    char *d = s;
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            *d++ = *s;
    *d = '\0';
}

/* Collapses runs of white space to one space and drops it at the ends. */
static void collapse_space(char *s)
{
    char *start = s, *d = s;
    int space = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) {
            space = 1;
            continue;
        }
        if (space && d > start)
            *d++ = ' ';
        space = 0;
        *d++ = *s;
    }
    *d = '\0';
}

/* ---- the functions of cadre.h ------------------------------------------- */

struct func {
    char name[128];
    char decl[1024];  /* as declared, white space collapsed */
    char proto[1024]; /* without white space, e.g. "intcadre_init(int*argc,char***argv);" */
};

/* Blanks comments and preprocessor lines (with their continuations), keeping
 * string literals, so that only declarations remain. */
static void blank_comments_and_directives(char *s)
{
    int line_start = 1;
    for (char *p = s; *p;) {
        if (line_start) {
            char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q == '#') {
                /* A directive runs to an end of line not escaped by '\\'. */
                char prev = 0;
                for (; *p; p++) {
                    if (*p == '\n' && prev != '\\')
                        break;
                    prev = *p;
                    if (*p != '\n')
                        *p = ' ';
                }
                continue;
            }
        }
        line_start = 0;
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            for (; p < stop; p++)
                if (*p != '\n')
                    *p = ' ';
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++)
                *p = ' ';
            continue;
        }
        if (*p == '"' || *p == '\'') {
            char quote = *p++;
            for (; *p && *p != quote; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (*p)
                p++;
            continue;
        }
        if (*p == '\n')
            line_start = 1;
        p++;
    }
}

static int is_ident(int c)
{
    return isalnum(c) || c == '_';
}

/* Every "cadre_[a-z0-9_]+ (" declared in cadre.h, with its prototype. */
static int header_functions(struct func *out, int max, char **err)
{
    char *text = slurp(src_path("include/cadre.h"));
    if (!text) {
        addf(err, "cannot read %s\n", src_path("include/cadre.h"));
        return -1;
    }
    blank_comments_and_directives(text);
    int n = 0;
    for (char *p = text; *p; p++) {
        if (strncmp(p, "cadre_", 6) != 0 || (p > text && is_ident((unsigned char)p[-1])))
            continue;
        char *e = p + 6;
        while (*e && (islower((unsigned char)*e) || isdigit((unsigned char)*e) || *e == '_'))
            e++;
        if (e == p + 6 || is_ident((unsigned char)*e))
            continue; /* not all lower case: not a function of the pattern */
        char *after = e;
        while (isspace((unsigned char)*after))
            after++;
        if (*after != '(')
            continue;
        /* The declaration runs from the end of the previous one to the ';'. */
        char *start = p;
        while (start > text && !strchr(";{}", start[-1]))
            start--;
        char *semi = strchr(e, ';');
        if (!semi || n >= max) {
            addf(err, "cannot read the declaration of %.*s in cadre.h\n", (int)(e - p), p);
            p = e;
            continue;
        }
        struct func *f = &out[n++];
        snprintf(f->name, sizeof f->name, "%.*s", (int)(e - p), p);
        snprintf(f->decl, sizeof f->decl, "%.*s", (int)(semi + 1 - start), start);
        collapse_space(f->decl);
        snprintf(f->proto, sizeof f->proto, "%s", f->decl);
        strip_space(f->proto);
        p = semi;
    }
    free(text);
    return n;
}

/* ---- mdoc SYNOPSIS ------------------------------------------------------- */

/* Splits the arguments of an mdoc macro line: words, or "quoted words" with
 * "" for a literal quote. Returns the count; args point into line. */
static int macro_args(char *line, char **args, int max)
{
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (*p == '"') {
            char *d = ++p;
            args[n++] = d;
            for (; *p; p++) {
                if (*p == '"' && p[1] == '"') {
                    *d++ = '"';
                    p++;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *d++ = *p;
                }
            }
            *d = '\0';
            if (*p == ' ')
                p++;
        } else {
            args[n++] = p;
            while (*p && *p != ' ')
                p++;
            if (*p)
                *p++ = '\0';
        }
    }
    return n;
}

/* Does the SYNOPSIS of the page declare name with exactly proto (white space
 * aside)? Understands .Ft with .Fn, and .Ft with .Fo/.Fa/.Fc. */
static int page_declares(const char *page, const char *proto)
{
    char *copy = strdup(page);
    if (!copy)
        return 0;
    int in_synopsis = 0, found = 0;
    char type[256] = "", built[1024] = "";
    int open = 0, nargs = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line && !found;
         line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, ".Sh ", 4)) {
            in_synopsis = !strcmp(line + 4, "SYNOPSIS");
            continue;
        }
        if (!in_synopsis || line[0] != '.')
            continue;
        char *args[32];
        char macro[8];
        snprintf(macro, sizeof macro, "%.3s", line);
        int n = macro_args(line + 3, args, 32);
        if (!strcmp(macro, ".Ft")) {
            type[0] = '\0';
            for (int i = 0; i < n; i++)
                snprintf(type + strlen(type), sizeof type - strlen(type), "%s ", args[i]);
        } else if (!strcmp(macro, ".Fn") && n >= 1) {
            snprintf(built, sizeof built, "%s %s(", type, args[0]);
            for (int i = 1; i < n; i++)
                snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s",
                         i > 1 ? ", " : "", args[i]);
            snprintf(built + strlen(built), sizeof built - strlen(built), ");");
            strip_space(built);
            found = !strcmp(built, proto);
        } else if (!strcmp(macro, ".Fo") && n >= 1) {
            snprintf(built, sizeof built, "%s %s(", type, args[0]);
            open = 1;
            nargs = 0;
        } else if (!strcmp(macro, ".Fa") && open) {
            for (int i = 0; i < n; i++, nargs++)
                snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s",
                         nargs ? ", " : "", args[i]);
        } else if (!strcmp(macro, ".Fc") && open) {
            open = 0;
            snprintf(built + strlen(built), sizeof built - strlen(built), ");");
            strip_space(built);
            found = !strcmp(built, proto);
        }
    }
    free(copy);
    return found;
}

/* Is ".Nm name" a line of the NAME section? */
static int page_names(const char *page, const char *name)
{
    const char *name_sh = strstr(page, "\n.Sh NAME\n");
    if (!name_sh)
        return 0;
    const char *end = strstr(name_sh + 1, "\n.Sh ");
    size_t len = strlen(name);
    for (const char *p = strstr(name_sh, "\n.Nm "); p && (!end || p < end);
         p = strstr(p + 1, "\n.Nm ")) {
        const char *q = p + 5;
        if (!strncmp(q, name, len) && (q[len] == '\n' || q[len] == ' ' || q[len] == '\0'))
            return 1;
    }
    return 0;
}

static void test_every_function_has_a_page(void)
{
    static struct func funcs[512];
    char *err = NULL;
    int n = header_functions(funcs, 512, &err);
    CHECK_MSG(n > 0, "no function declarations found in include/cadre.h\n%s", err ? err : "");
    for (int i = 0; i < n; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "man/man3/%.200s.3", funcs[i].name);
        struct stat st;
        if (stat(src_path(rel), &st) != 0) {
            addf(&err, "%s: no manual page %s\n", funcs[i].name, rel);
            continue;
        }
        char *page = slurp(src_path(rel));
        if (!page) {
            addf(&err, "%s: cannot read %s\n", funcs[i].name, rel);
            continue;
        }
        if (!page_names(page, funcs[i].name))
            addf(&err, "%s: %s has no \".Nm %s\" in its NAME section\n", funcs[i].name, rel,
                 funcs[i].name);
        if (!page_declares(page, funcs[i].proto))
            addf(&err, "%s: the SYNOPSIS of %s does not give the prototype of cadre.h: %s\n",
                 funcs[i].name, rel, funcs[i].decl);
        free(page);
    }
    CHECK_MSG(err == NULL, "%d functions in cadre.h; problems:\n%s", n, err ? err : "");
    free(err);
}

/* ---- the pages on disk --------------------------------------------------- */

static const char *const sections[] = {"man1", "man3", "man7"};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Pages "manN/name.N" under root (sorted, malloc'ed strings); returns count. */
static int list_pages(const char *root, char **out, int max)
{
    int n = 0;
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/%s", root, sections[s]);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *e;
        char suffix[3] = {'.', sections[s][3], '\0'};
        while ((e = readdir(d)) && n < max) {
            size_t len = strlen(e->d_name);
            if (len > 2 && !strcmp(e->d_name + len - 2, suffix)) {
                char rel[PATH_MAX];
                snprintf(rel, sizeof rel, "%s/%s", sections[s], e->d_name);
                out[n++] = strdup(rel);
            }
        }
        closedir(d);
    }
    qsort(out, (size_t)n, sizeof out[0], cmp_str);
    return n;
}

/* Single-quoted for sh. */
static void shquote(char *dst, size_t cap, const char *s)
{
    size_t k = 0;
    if (k < cap - 1)
        dst[k++] = '\'';
    for (; *s && k + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(dst + k, "'\\''", 4);
            k += 4;
        } else {
            dst[k++] = *s;
        }
    }
    if (k < cap - 1)
        dst[k++] = '\'';
    dst[k] = '\0';
}

static void test_mandoc_lint(void)
{
    const char *mandoc = getenv("MANDOC");
    if (!mandoc || !*mandoc) {
        CHECK_MSG(0, "mandoc was not found when configure ran, so the man pages cannot be "
                     "checked: install it (Debian: apt-get install mandoc) and run configure "
                     "again");
        return;
    }
    if (access(mandoc, X_OK) != 0) {
        CHECK_MSG(0, "MANDOC=%s is not an executable: install mandoc and run configure again",
                  mandoc);
        return;
    }
    /* The source tree holds the written pages, the build tree the generated
     * cadre-env.7; they are one tree when building in the source directory. */
    char src_root[PATH_MAX], build_root[PATH_MAX];
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(src_path("man"), src_root));
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(build_path("man"), build_root));
    const char *roots[2] = {src_root, build_root};
    int nroots = strcmp(src_root, build_root) ? 2 : 1;

    struct stat st;
    CHECK_MSG(stat(build_path("man/man7/cadre-env.7"), &st) == 0,
              "man/man7/cadre-env.7 was not generated in the build tree");

    int total = 0;
    for (int r = 0; r < nroots; r++) {
        char *pages[256];
        int n = list_pages(roots[r], pages, 256);
        if (n == 0)
            continue;
        /* Run from the man directory, as man(1) does, with relative names. */
        char cmd[16384], q[PATH_MAX + 16];
        shquote(q, sizeof q, roots[r]);
        int len = snprintf(cmd, sizeof cmd, "cd %s && ", q);
        shquote(q, sizeof q, mandoc);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, "%s -T lint -W warning", q);
        for (int i = 0; i < n; i++) {
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", pages[i]);
            free(pages[i]);
        }
        CU_ASSERT_FATAL((size_t)len < sizeof cmd);
        struct run_result res;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &res) == 0);
        CHECK_MSG(res.exit_code == 0 && res.out_len == 0 && res.err_len == 0,
                  "mandoc -T lint -W warning in %s (exit %d):\n%s%s", roots[r], res.exit_code,
                  res.out, res.err);
        run_free(&res);
        total += n;
    }
    CHECK_MSG(total >= 3, "only %d man pages found under %s", total, src_root);
}

/* Every page of the source tree, and cadre-env.7 from its .in, is installed:
 * named in man/Makefile.am. */
static void test_pages_listed(void)
{
    char *am = slurp(src_path("man/Makefile.am"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(am);
    char *pages[256];
    int n = list_pages(src_path("man"), pages, 256);
    char *err = NULL;
    const char *generated[] = {"man7/cadre-env.7"};
    for (int i = 0; i < n + 1; i++) {
        const char *page = i < n ? pages[i] : generated[0];
        size_t len = strlen(page);
        int listed = 0;
        for (const char *p = strstr(am, page); p && !listed; p = strstr(p + 1, page))
            listed = (p == am || isspace((unsigned char)p[-1]) || p[-1] == '=') &&
                     (p[len] == '\0' || isspace((unsigned char)p[len]) || p[len] == '\\');
        if (!listed)
            addf(&err, "%s is not listed in man/Makefile.am\n", page);
    }
    for (int i = 0; i < n; i++)
        free(pages[i]);
    CHECK_MSG(err == NULL, "%s", err ? err : "");
    free(err);
    free(am);
}

/* ---- cadre-env(7) and the config table ---------------------------------- */

static void test_tunables_in_cadre_env7(void)
{
    char *table = slurp(src_path("runtime/runtime_config_table.h"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    char *page = slurp(build_path("man/man7/cadre-env.7"));
    CHECK_MSG(page != NULL, "cannot read the generated %s", build_path("man/man7/cadre-env.7"));
    if (!page) {
        free(table);
        return;
    }
    const char *env = strstr(page, "\n.Sh ENVIRONMENT\n");
    CHECK_MSG(env != NULL, "cadre-env.7 has no ENVIRONMENT section");
    const char *env_end = env ? strstr(env + 1, "\n.Sh ") : NULL;
    char *err = NULL;
    int entries = 0;
    for (char *line = table; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!strncmp(line, "X(", 2)) {
            const char *p = line + 2;
            while (*p == ' ')
                p++;
            size_t idlen = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
            char want[160];
            snprintf(want, sizeof want, "\n.It Ev CADRE_%.*s", (int)idlen, p);
            size_t wl = strlen(want);
            int found = 0;
            for (const char *q = env ? strstr(env, want) : NULL; q && !found;
                 q = strstr(q + 1, want))
                found = (!env_end || q < env_end) && (q[wl] == ' ' || q[wl] == '\n');
            if (!found)
                addf(&err, "CADRE_%.*s is missing from the ENVIRONMENT section of cadre-env.7\n",
                     (int)idlen, p);
            entries++;
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECK_MSG(entries > 0, "no X(...) entries in runtime/runtime_config_table.h");
    CHECK_MSG(err == NULL, "%s", err ? err : "");
    free(err);
    free(page);
    free(table);
}

/* ---- the pages of section 7 ---------------------------------------------- */

/* A reference "Xr NAME 7" (".Xr", ".It Xr", ".Pq Xr" ...) within [from, to). */
static int names_page_in(const char *from, const char *to, const char *name, int section)
{
    char want[128];
    int wl = snprintf(want, sizeof want, "Xr %s %d", name, section);
    for (const char *q = strstr(from, want); q && q < to; q = strstr(q + 1, want))
        if ((q[-1] == '.' || q[-1] == ' ') && (q[wl] == '\n' || q[wl] == ' '))
            return 1;
    return 0;
}

static int names_page(const char *from, const char *to, const char *name)
{
    return names_page_in(from, to, name, 7);
}

/* cadre(7) is the overview and each cadre-TOPIC(7) one topic of it: every
 * page of section 7 names every other in its SEE ALSO, the overview also in
 * its DESCRIPTION (its map of the topics), and no page's source is longer
 * than 900 lines (cadre-env.7 counts its .in, without the generated list);
 * the overview's SEE ALSO names every page of sections 1 and 3 as well. */
static void test_man7_pages_linked(void)
{
    char *pages[256];
    int n = list_pages(src_path("man"), pages, 256);
    char *names[32];
    int nn = 0;
    char *others[256]; /* "cadre_send 3" */
    int no = 0;
    for (int i = 0; i < n; i++) {
        const char *p = pages[i];
        size_t len = strlen(p);
        if (!strncmp(p, "man7/cadre", 10) && nn < 32 && strcmp(p, "man7/cadre-env.7"))
            names[nn++] = strndup(p + 5, len - 7);
        else if ((!strncmp(p, "man1/", 5) || !strncmp(p, "man3/", 5)) && no < 256)
            others[no++] = strdup(p);
        free(pages[i]);
    }
    names[nn++] = strdup("cadre-env");
    char *err = NULL;
    int have_overview = 0;
    for (int i = 0; i < nn; i++) {
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "man/man7/%s.7%s", names[i],
                 strcmp(names[i], "cadre-env") ? "" : ".in");
        char *page = slurp(src_path(rel));
        if (!page) {
            addf(&err, "cannot read %s\n", rel);
            continue;
        }
        int lines = 0;
        for (const char *c = page; *c; c++)
            lines += *c == '\n';
        if (lines > 900)
            addf(&err, "%s has %d lines, more than 900: split it by topic\n", rel, lines);
        const char *see = strstr(page, "\n.Sh SEE ALSO\n");
        const char *see_end = see ? strstr(see + 1, "\n.Sh ") : NULL;
        if (!see_end)
            see_end = page + strlen(page);
        const char *desc = strstr(page, "\n.Sh DESCRIPTION\n");
        const char *desc_end = desc ? strstr(desc + 1, "\n.Sh ") : NULL;
        if (!see)
            addf(&err, "%s has no SEE ALSO section\n", rel);
        int overview = !strcmp(names[i], "cadre");
        have_overview |= overview;
        for (int j = 0; j < nn && see; j++) {
            if (j == i)
                continue;
            if (!names_page(see, see_end, names[j]))
                addf(&err, "the SEE ALSO of %s lacks .Xr %s 7\n", rel, names[j]);
            if (overview && (!desc || !names_page(desc, desc_end ? desc_end : see, names[j])))
                addf(&err, "the DESCRIPTION of %s (its map of topics) lacks .Xr %s 7\n", rel,
                     names[j]);
        }
        for (int j = 0; j < no && overview && see; j++) {
            /* "man3/cadre_send.3" */
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)strlen(others[j]) - 7, others[j] + 5);
            int sec = others[j][3] - '0';
            if (!names_page_in(see, see_end, name, sec))
                addf(&err, "the SEE ALSO of %s lacks .Xr %s %d\n", rel, name, sec);
        }
        free(page);
    }
    CHECK_MSG(have_overview && nn >= 2, "man/man7 has %d cadre pages, no cadre.7 among them? (%d)",
              nn, have_overview);
    CHECK_MSG(err == NULL, "%s", err ? err : "");
    free(err);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    for (int i = 0; i < no; i++)
        free(others[i]);
}

/* ---- README Quick start and .ci/run -------------------------------------- */

/* .ci/run takes the two Quick start commands from README.md; this checks that
 * it still finds them and that they still do what the README says. */
static void test_readme_quickstart(void)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "%s --print", src_path(".ci/run"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0, ".ci/run --print exited %d:\n%s%s", r.exit_code, r.out, r.err);
    static const char *const expected[] = {
        "apt-get install", "libpmix-dev", "libcunit1-dev", "mandoc", "libucx-dev", "./autogen.sh",
        "./configure", "./launcher/cadrerun -n 4 ./examples/hello", "\nmake check\n",
        "make distcheck DISTCHECK_CONFIGURE_FLAGS=\"--without-cuda --without-ucx\""};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        CHECK_MSG(strstr(r.out, expected[i]) != NULL,
                  "the commands of .ci/run (from README.md's Quick start) lack \"%s\":\n%s",
                  expected[i], r.out);
    run_free(&r);
}

/* ---- the error-reporting wrappers --------------------------------------- */

/* Every function of cadre.h that returns a status goes through a wrapper of
 * lifecycle/lifecycle_api.c, which applies CADRE_ERRORS: it has a line in
 * runtime/api_list.h and its rename in runtime/api_names.h. A function
 * missing from both would fail silently; from one, the build breaks or a
 * call inside the library would be reported. */
static void test_every_function_is_wrapped(void)
{
    static struct func funcs[512];
    char *err = NULL;
    int n = header_functions(funcs, 512, &err);
    char *list = slurp(src_path("runtime/api_list.h"));
    char *names = slurp(src_path("runtime/api_names.h"));
    CHECK_MSG(n > 0 && list && names, "cannot read cadre.h, api_list.h or api_names.h\n%s",
              err ? err : "");
    for (int i = 0; i < n && list && names; i++) {
        const char *short_name = funcs[i].name + strlen("cadre_");
        char entry[256], rename[256];
        snprintf(entry, sizeof entry, ", %s, (", short_name);
        snprintf(rename, sizeof rename, "#define %s cadre__impl_%s\n", funcs[i].name, short_name);
        int in_list = strstr(list, entry) != NULL, in_names = strstr(names, rename) != NULL;
        if (!strncmp(funcs[i].decl, "int ", 4)) {
            if (!in_list)
                addf(&err, "%s: no \"CADRE__API(kind%s\" line in runtime/api_list.h\n",
                     funcs[i].name, entry);
            if (!in_names)
                addf(&err, "%s: no \"%.*s\" in runtime/api_names.h\n", funcs[i].name,
                     (int)strlen(rename) - 1, rename);
        } else if (in_list || in_names) {
            addf(&err, "%s returns no status, yet is in runtime/api_list.h or api_names.h\n",
                 funcs[i].name);
        }
    }
    CHECK_MSG(err == NULL, "%s", err ? err : "");
    free(err);
    free(list);
    free(names);
}

void suite_man(void)
{
    CU_pSuite s = CU_add_suite("man", NULL, NULL);
    CU_add_test(s, "every function of cadre.h has a page with its prototype",
                test_every_function_has_a_page);
    CU_add_test(s, "mandoc -T lint -W warning is silent", test_mandoc_lint);
    CU_add_test(s, "every page is installed", test_pages_listed);
    CU_add_test(s, "cadre-env(7) lists every tunable", test_tunables_in_cadre_env7);
    CU_add_test(s, "the pages of section 7 name each other, each under 900 lines",
                test_man7_pages_linked);
    CU_add_test(s, "README Quick start is what .ci/run runs", test_readme_quickstart);
    CU_add_test(s, "every function with a status reports its failures",
                test_every_function_is_wrapped);
}
