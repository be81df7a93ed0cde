/* libucp loaded at run time (p2p_ucx_load.h): dlopen, the function table,
 * and a description of what a UCP context offers here (transports and
 * devices, RDMA or not, CUDA memory or not) for the transport's default
 * choice and cadre-info. Uses no other part of cadre. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p_ucx_load.h"

#if HAVE_UCX
struct cadre_ucx_fns cadre__ucx;

static int load_rc = 1; /* 1: not tried yet */
static char load_why[512];

int cadre__ucx_load(const char *lib, char *why, size_t len)
{
    if (load_rc == 1) {
        if (!lib || !*lib)
            lib = "libucp.so.0";
        /* RTLD_LOCAL: UCX's symbols stay out of the global namespace; its
         * own libraries (libucs, libuct) come in as its dependencies. */
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(load_why, sizeof load_why, "%s", e ? e : lib);
            load_rc = -1;
        } else {
            load_rc = 0;
#define X(f)                                                                                   \
    if (!load_rc && !(cadre__ucx.f = (__typeof__(&f))dlsym(h, #f))) {                            \
        snprintf(load_why, sizeof load_why, "%s has no %s (UCX older than 1.10?)", lib, #f);    \
        load_rc = -1;                                                                          \
    }
            CADRE_UCX_FNS(X)
#undef X
            /* Never closed: UCX does not support being unloaded. */
        }
    }
    if (load_rc && why)
        snprintf(why, len, "%s", load_why);
    return load_rc;
}

/* An RDMA transport of UCX: rc, dc and ud over verbs or mlx5 (rc_verbs,
 * rc_mlx5, dc_mlx5, ud_verbs, ud_mlx5...). */
static int tl_is_rdma(const char *tl)
{
    return !strncmp(tl, "rc", 2) || !strncmp(tl, "dc", 2) || !strncmp(tl, "ud", 2);
}

void cadre__ucx_context_info(ucp_context_h c, struct cadre_ucx_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->version, sizeof info->version, "%s", cadre__ucx.ucp_get_version_string());
    ucp_context_attr_t a = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (cadre__ucx.ucp_context_query(c, &a) == UCS_OK)
        info->cuda = (a.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    /* UCP lists its resources only as text: "#      resource 1  :  md 1
     * dev 1  flags -- tcp/eth0". */
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    if (!f)
        return;
    cadre__ucx.ucp_context_print_info(c, f);
    fclose(f);
    size_t n = 0;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *dash = strstr(line, " -- ");
        if (strstr(line, "resource") && dash) {
            char *res = dash + 4;
            res[strcspn(res, " \t")] = '\0';
            info->rdma |= tl_is_rdma(res);
            if (n + strlen(res) + 3 < sizeof info->resources)
                n += (size_t)snprintf(info->resources + n, sizeof info->resources - n, "%s%s",
                                      n ? ", " : "", res);
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
}

int cadre__ucx_probe(const char *lib, struct cadre_ucx_info *info, char *why, size_t len)
{
    memset(info, 0, sizeof *info);
    if (cadre__ucx_load(lib, why, len))
        return -1;
    ucp_config_t *cfg;
    ucs_status_t st = cadre__ucx.ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        snprintf(why, len, "ucp_config_read: %s", cadre__ucx.ucs_status_string(st));
        return -1;
    }
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                      .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
    ucp_context_h c;
    st = cadre__ucx.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, &c);
    cadre__ucx.ucp_config_release(cfg);
    if (st != UCS_OK) {
        snprintf(why, len, "ucp_init: %s", cadre__ucx.ucs_status_string(st));
        return -1;
    }
    cadre__ucx_context_info(c, info);
    cadre__ucx.ucp_cleanup(c);
    return 0;
}

#else /* !HAVE_UCX */

int cadre__ucx_load(const char *lib, char *why, size_t len)
{
    (void)lib;
    snprintf(why, len, "not built: configure found no UCX headers (ucp/api/ucp.h; Debian: "
                       "apt-get install libucx-dev)");
    return -1;
}

int cadre__ucx_probe(const char *lib, struct cadre_ucx_info *info, char *why, size_t len)
{
    memset(info, 0, sizeof *info);
    return cadre__ucx_load(lib, why, len);
}
#endif
