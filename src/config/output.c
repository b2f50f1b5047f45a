/* Printing the configuration: config_dump() writes the effective values as
 * a YAML file that loads back to the same config (the key redacted;
 * config_dump_secrets() keeps it, for the HTTP process's settings), and
 * config_doc() writes the markdown table pasted into docs/CONFIG.md. */
#include <string.h>

#include "config/schema.h"

static bool same_section(const char *a, const char *b)
{
        size_t la = schema_section_len(a);
        return b && la == schema_section_len(b) && strncmp(a, b, la) == 0;
}

static void dump(const struct config *cfg, FILE *out, bool secrets)
{
        const char *prev = NULL;
        for (size_t i = 0; i < schema_n_rows; i++) {
                const struct schema_row *row = &schema_rows[i];
                size_t sl = schema_section_len(row->name);
                if (row->flags & SCHEMA_DEPRECATED)
                        continue;
                if (sl && !same_section(row->name, prev))
                        fprintf(out, "%.*s:\n", (int)sl, row->name);
                prev = row->name;
                int indent = sl ? 2 : 0;
                fprintf(out, "%*s%s:", indent, "", row->name + (sl ? sl + 1 : 0));
                if (secrets && (row->flags & SCHEMA_SECRET)) {
                        fputc(' ', out);
                        schema_dump_string(out, *(char *const *)schema_cfield(row, cfg));
                        fputc('\n', out);
                } else {
                        row->type->dump(row, cfg, out, indent);
                }
        }
}

void config_dump(const struct config *cfg, FILE *out)
{
        dump(cfg, out, false);
}

void config_dump_secrets(const struct config *cfg, FILE *out)
{
        dump(cfg, out, true);
}

static void doc_default(const struct schema_row *row, char *buf, size_t len)
{
        if (row->flags & SCHEMA_DEPRECATED)
                snprintf(buf, len, "(ignored)");
        else if (row->type->is_list)
                snprintf(buf, len, "`[%s]`", row->def ? row->def : "");
        else if (!row->def || !*row->def)
                snprintf(buf, len, "`\"\"`");
        else
                snprintf(buf, len, "`%s`", row->def);
}

static void doc_row(const struct schema_row *row, FILE *out)
{
        char env[80], bounds[80], def[160];
        if (schema_env_name(row, env, sizeof(env)) < 0)
                env[0] = '\0';
        row->type->describe(row, bounds, sizeof(bounds));
        doc_default(row, def, sizeof(def));
        fprintf(out, "| `%s` | `%s` | %s%s%s | %s | %s |\n", row->name, env, row->type->doc_name,
                bounds[0] ? ", " : "", bounds, def, row->doc);
}

void config_doc(FILE *out)
{
        fputs("| key | env | type | default | description |\n", out);
        fputs("|---|---|---|---|---|\n", out);
        for (size_t i = 0; i < schema_n_rows; i++)
                doc_row(&schema_rows[i], out);
}
