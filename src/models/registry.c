/* The one table of models: every name --model takes comes from here, and so
 * do --help, --list-models and the error for an unknown name.  A new family
 * is a file of its own (its builder and presets) and one line below. */
#include <stdio.h>
#include <string.h>

#include "builder.h"

static const cdp_model_family *const families[] = {
    &cdp_family_mlp,
    &cdp_family_resnet,
    &cdp_family_vit,
    &cdp_family_mobile,
    &cdp_family_file,      /* FILE.json: a model description file */
    &cdp_family_defined,   /* the program's own (cdp_model_define), after cdp's */
};
#define NFAMILIES (sizeof families / sizeof *families)

const cdp_model_family *cdp_model_family_of(const char *spec)
{
    for (size_t f = 0; f < NFAMILIES; f++) {
        const cdp_model_family *fam = families[f];
        if ((fam->form_prefix && strncmp(spec, fam->form_prefix, strlen(fam->form_prefix)) == 0) ||
            (fam->claims && fam->claims(spec)))
            return fam;
        cdp_model_entry e;
        for (int k = 0; fam->preset(k, &e); k++)
            if (strcmp(spec, e.name) == 0)
                return fam;
    }
    return NULL;
}

/* In each family: its free form first, then its presets. */
int cdp_model_entry_at(int k, cdp_model_entry *e)
{
    if (k < 0)
        return 0;
    for (size_t f = 0; f < NFAMILIES; f++) {
        const cdp_model_family *fam = families[f];
        memset(e, 0, sizeof *e);
        e->family = fam->name;
        if (fam->form) {
            if (k == 0) {
                e->name = fam->form;
                e->free_form = 1;
                snprintf(e->about, sizeof e->about, "%s", fam->form_about);
                return 1;
            }
            k--;
        }
        int n = 0;
        while (fam->preset(n, e))
            n++;
        if (k < n) {
            memset(e, 0, sizeof *e);
            e->family = fam->name;
            return fam->preset(k, e);
        }
        k -= n;
    }
    return 0;
}

const char *cdp_model_names(void)
{
    static char names[1024];
    size_t len = 0;
    cdp_model_entry e;
    names[0] = '\0';
    for (int k = 0; cdp_model_entry_at(k, &e) && len < sizeof names; k++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", k ? ", " : "", e.name);
    return names;
}

const char *cdp_model_forms(void)
{
    static char forms[256];
    size_t len = 0;
    int n = 0;
    forms[0] = '\0';
    for (size_t f = 0; f < NFAMILIES; f++)
        if (families[f]->form && len < sizeof forms)
            len += (size_t)snprintf(forms + len, sizeof forms - len, "%s%s", n++ ? " or " : "",
                                    families[f]->form);
    return forms;
}

void cdp_model_list(FILE *f)
{
    cdp_model_entry e;
    fprintf(f, "%-42s %-7s %-10s %s\n", "MODEL", "FAMILY", "INPUT", "WHAT IT IS");
    for (int k = 0; cdp_model_entry_at(k, &e); k++) {
        char input[32] = "from data";
        if (e.input.c)
            snprintf(input, sizeof input, "%dx%dx%d", e.input.c, e.input.h, e.input.w);
        fprintf(f, "%-42s %-7s %-10s %s\n", e.name, e.family, input, e.about);
    }
}
