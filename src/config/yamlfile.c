/* Reads the config file with libyaml's document API and hands each value to
 * the schema with its line and column. An event pass first bounds nesting
 * and anchors (see check_shape). The walk itself is at most two mappings
 * deep plus one list level and never recurses on the input's nesting. */
#include <string.h>
#include <yaml.h>

#include "base/util.h"
#include "config/loader.h"

static struct origin mark_origin(yaml_mark_t m)
{
        return (struct origin){
            .kind = ORIGIN_FILE, .line = (int)m.line + 1, .col = (int)m.column + 1};
}

static struct origin node_origin(const yaml_node_t *node)
{
        return mark_origin(node->start_mark);
}

/* Plain "", "~" and "null" (any common case), or an explicit !!null. */
static bool node_is_null(const yaml_node_t *node)
{
        static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
        if (node->type != YAML_SCALAR_NODE)
                return false;
        if (node->tag && strcmp((const char *)node->tag, YAML_NULL_TAG) == 0)
                return true;
        if (node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(nulls); i++)
                if (strcmp((const char *)node->data.scalar.value, nulls[i]) == 0)
                        return true;
        return false;
}

/* A scalar's text, or NULL when it hides a NUL byte ("\0" in a quoted
 * scalar) that C strings would silently cut at. */
static const char *scalar_text(const yaml_node_t *node)
{
        const char *s = (const char *)node->data.scalar.value;
        return strlen(s) == node->data.scalar.length ? s : NULL;
}

static int fail_node(struct loader *L, const yaml_node_t *node, const char *key, const char *what)
{
        struct origin o = node_origin(node);
        return loader_fail(L, -EINVAL, &o, key, "%s", what);
}

/* One list entry; a null entry stays NULL and the type decides. */
static int sequence_item(struct loader *L, yaml_document_t *doc, const struct schema_row *row,
                         yaml_node_item_t id, struct schema_item *ret)
{
        yaml_node_t *node = yaml_document_get_node(doc, id);
        if (!node)
                return loader_fail(L, -EINVAL, &(struct origin){0}, NULL, "broken YAML document");
        if (node->type != YAML_SCALAR_NODE)
                return fail_node(L, node, row->name, "list entries must be single values");
        const char *text = node_is_null(node) ? NULL : scalar_text(node);
        if (!text && !node_is_null(node))
                return fail_node(L, node, row->name, "contains a NUL byte");
        *ret = (struct schema_item){text, (int)node->start_mark.line + 1,
                                    (int)node->start_mark.column + 1};
        return 0;
}

static int apply_sequence(struct loader *L, yaml_document_t *doc, const struct schema_row *row,
                          yaml_node_t *value)
{
        yaml_node_item_t *start = value->data.sequence.items.start;
        size_t n = (size_t)(value->data.sequence.items.top - start);
        _cleanup_free_ struct schema_item *items = calloc(n ? n : 1, sizeof(*items));
        struct origin o = node_origin(value);
        if (!row->type->is_list)
                return fail_node(L, value, row->name, "expected a single value, not a list");
        if (!items)
                return loader_fail(L, -ENOMEM, &o, row->name, "out of memory");
        for (size_t i = 0; i < n; i++) {
                int r = sequence_item(L, doc, row, start[i], &items[i]);
                if (r < 0)
                        return r;
        }
        return loader_apply(L, row, items, n, &o);
}

static int apply_scalar(struct loader *L, const struct schema_row *row, yaml_node_t *value)
{
        struct origin o = node_origin(value);
        bool null = node_is_null(value);
        struct schema_item item = {null ? NULL : scalar_text(value), o.line, o.col};
        if (row->type->is_list && !null)
                return fail_node(L, value, row->name, "expected a list");
        if (!null && !item.text)
                return fail_node(L, value, row->name, "contains a NUL byte");
        return loader_apply(L, row, &item, row->type->is_list ? 0 : 1, &o);
}

static int apply_value(struct loader *L, yaml_document_t *doc, const struct schema_row *row,
                       const yaml_node_t *key, yaml_node_t *value)
{
        struct key_state *st = &L->state[row - schema_rows];
        if (st->seen)
                return fail_node(L, key, row->name, "duplicate key");
        st->seen = true;
        if (row->flags & SCHEMA_DEPRECATED) {
                struct origin o = node_origin(key);
                loader_warn_deprecated(L, row, &o);
                return 0;
        }
        switch (value->type) {
        case YAML_SCALAR_NODE:
                return apply_scalar(L, row, value);
        case YAML_SEQUENCE_NODE:
                return apply_sequence(L, doc, row, value);
        default:
                return fail_node(L, value, row->name,
                                 row->type->is_list ? "expected a list"
                                                    : "expected a single value, not a mapping");
        }
}

static int walk_mapping(struct loader *L, yaml_document_t *doc, const char *section,
                        yaml_node_t *mapping);

static struct key_state *section_state(struct loader *L, const char *name)
{
        size_t len = strlen(name);
        for (size_t i = 0; i < schema_n_rows; i++)
                if (schema_section_len(schema_rows[i].name) == len &&
                    strncmp(schema_rows[i].name, name, len) == 0)
                        return &L->state[i];
        return NULL;
}

static int walk_section(struct loader *L, yaml_document_t *doc, const char *name,
                        const yaml_node_t *key, yaml_node_t *value)
{
        struct key_state *st = section_state(L, name);
        if (!st)
                return fail_node(L, key, name, "unknown key");
        if (st->section_seen)
                return fail_node(L, key, name, "duplicate key");
        st->section_seen = true;
        if (node_is_null(value))
                return 0;
        if (value->type != YAML_MAPPING_NODE)
                return fail_node(L, value, name, "expected a mapping");
        return walk_mapping(L, doc, name, value);
}

/* Full dotted name of key inside section (NULL = top level). Keys that
 * cannot name a row come back as a quoted form for the message, flagged. */
static int key_name(struct loader *L, const char *section, const yaml_node_t *key, char *buf,
                    size_t len, bool *ret_known)
{
        char q[96];
        if (key->type != YAML_SCALAR_NODE)
                return fail_node(L, key, section, "keys must be plain strings");
        const char *text = scalar_text(key);
        schema_quote((const char *)key->data.scalar.value, q, sizeof(q));
        if (!q[0])
                snprintf(q, sizeof(q), "''");
        bool known = text && *text && !strchr(text, '.');
        int n = section ? snprintf(buf, len, "%s.%s", section, known ? text : q)
                        : snprintf(buf, len, "%s", known ? text : q);
        if (n < 0 || (size_t)n >= len) {
                known = false;
                snprintf(buf, len, "%s%s%s", section ? section : "", section ? "." : "", q);
        }
        *ret_known = known;
        return 0;
}

static int walk_pair(struct loader *L, yaml_document_t *doc, const char *section,
                     const yaml_node_pair_t *pair)
{
        yaml_node_t *key = yaml_document_get_node(doc, pair->key);
        yaml_node_t *value = yaml_document_get_node(doc, pair->value);
        char name[160];
        bool known = false;
        if (!key || !value)
                return loader_fail(L, -EINVAL, &(struct origin){0}, NULL, "broken YAML document");
        int r = key_name(L, section, key, name, sizeof(name), &known);
        if (r < 0)
                return r;
        if (known && !section && schema_is_section(name, strlen(name)))
                return walk_section(L, doc, name, key, value);
        const struct schema_row *row = known ? schema_find(name) : NULL;
        if (!row)
                return fail_node(L, key, name, "unknown key");
        return apply_value(L, doc, row, key, value);
}

static int walk_mapping(struct loader *L, yaml_document_t *doc, const char *section,
                        yaml_node_t *mapping)
{
        for (yaml_node_pair_t *p = mapping->data.mapping.pairs.start;
             p < mapping->data.mapping.pairs.top; p++) {
                int r = walk_pair(L, doc, section, p);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* libyaml's reader reports a byte offset, not a mark. */
static struct origin offset_origin(const char *buf, size_t len, size_t offset)
{
        struct origin o = {.kind = ORIGIN_FILE, .line = 1, .col = 1};
        for (size_t i = 0; i < offset && i < len; i++) {
                o.col = buf[i] == '\n' ? 1 : o.col + 1;
                o.line += buf[i] == '\n';
        }
        return o;
}

static int syntax_error(struct loader *L, const yaml_parser_t *parser, const char *buf, size_t len)
{
        struct origin o = parser->error == YAML_READER_ERROR
                              ? offset_origin(buf, len, parser->problem_offset)
                              : mark_origin(parser->problem_mark);
        if (parser->error == YAML_MEMORY_ERROR)
                return loader_fail(L, -ENOMEM, &o, NULL, "out of memory");
        return loader_fail(L, -EINVAL, &o, NULL, "YAML syntax error: %s",
                           parser->problem ? parser->problem : "unknown problem");
}

/* After a non-empty first document, the stream must end. */
static int expect_end(struct loader *L, yaml_parser_t *parser, const char *buf, size_t len)
{
        yaml_document_t doc;
        if (!yaml_parser_load(parser, &doc))
                return syntax_error(L, parser, buf, len);
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        struct origin o = mark_origin(doc.start_mark);
        yaml_document_delete(&doc);
        if (root)
                return loader_fail(L, -EINVAL, &o, NULL, "only one YAML document is allowed");
        return 0;
}

#define YAML_MAX_DEPTH 32
#define YAML_MAX_ANCHORS 256

static bool event_opens(const yaml_event_t *e)
{
        return e->type == YAML_SEQUENCE_START_EVENT || e->type == YAML_MAPPING_START_EVENT;
}

static bool event_closes(const yaml_event_t *e)
{
        return e->type == YAML_SEQUENCE_END_EVENT || e->type == YAML_MAPPING_END_EVENT;
}

/* One event at a time; the event is always deleted before returning. */
static int check_event(struct loader *L, yaml_event_t *e, int *depth, int *anchors)
{
        struct origin o = mark_origin(e->start_mark);
        *depth += event_opens(e) - event_closes(e);
        *anchors += e->type == YAML_ALIAS_EVENT ||
                    (e->type == YAML_SCALAR_EVENT && e->data.scalar.anchor) ||
                    (e->type == YAML_SEQUENCE_START_EVENT && e->data.sequence_start.anchor) ||
                    (e->type == YAML_MAPPING_START_EVENT && e->data.mapping_start.anchor);
        int r = e->type == YAML_STREAM_END_EVENT ? 1 : 0;
        yaml_event_delete(e);
        if (*depth > YAML_MAX_DEPTH)
                return loader_fail(L, -EINVAL, &o, NULL, "YAML nested deeper than %d levels",
                                   YAML_MAX_DEPTH);
        if (*anchors > YAML_MAX_ANCHORS)
                return loader_fail(L, -EINVAL, &o, NULL, "more than %d YAML anchors and aliases",
                                   YAML_MAX_ANCHORS);
        return r;
}

/* libyaml 0.2.5 has no nesting limit, and its scanner does work in
 * proportion to the flow depth for every token, and its loader looks each
 * alias up in a list of every anchor: deep "[[[[..." or thousands of
 * aliases take minutes. This event pass stops such input early, before
 * the document loader sees it, and reports syntax errors. */
static int check_shape(struct loader *L, const char *buf, size_t len)
{
        yaml_parser_t parser;
        yaml_event_t e;
        int depth = 0, anchors = 0, r = 0;
        struct origin o = {.kind = ORIGIN_FILE, .line = 1, .col = 1};
        if (!yaml_parser_initialize(&parser))
                return loader_fail(L, -ENOMEM, &o, NULL, "out of memory");
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
        while (r == 0)
                r = yaml_parser_parse(&parser, &e) ? check_event(L, &e, &depth, &anchors)
                                                   : syntax_error(L, &parser, buf, len);
        yaml_parser_delete(&parser);
        return r < 0 ? r : 0;
}

static int walk_document(struct loader *L, yaml_document_t *doc)
{
        yaml_node_t *root = yaml_document_get_root_node(doc);
        if (!root || node_is_null(root))
                return 0;
        if (root->type != YAML_MAPPING_NODE)
                return fail_node(L, root, NULL, "the top level must be a mapping");
        return walk_mapping(L, doc, NULL, root);
}

int loader_load_yaml(struct loader *L, const char *buf, size_t len)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        struct origin o = {.kind = ORIGIN_FILE, .line = 1, .col = 1};
        int r = check_shape(L, buf, len);
        if (r < 0)
                return r;
        if (!yaml_parser_initialize(&parser))
                return loader_fail(L, -ENOMEM, &o, NULL, "out of memory");
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
        r = yaml_parser_load(&parser, &doc) ? 0 : syntax_error(L, &parser, buf, len);
        if (r == 0) {
                bool empty = !yaml_document_get_root_node(&doc);
                r = walk_document(L, &doc);
                yaml_document_delete(&doc);
                if (r == 0 && !empty)
                        r = expect_end(L, &parser, buf, len);
        }
        yaml_parser_delete(&parser);
        return r;
}
