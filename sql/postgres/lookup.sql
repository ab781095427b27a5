{# Surrogate-key lookup for fact loaders: the version with valid_from <= ts < valid_to.
   Served by the dimension's index on (key, valid_from). #}
{# `at(x)`: a fact's timestamp as timestamptz. A `timestamp` or `date` column holds
   local times of source.timezone (`at_local`), converted by dimlog's rule for the change
   column (docs/concepts/time-zones.md), which PostgreSQL's `AT TIME ZONE` follows but for
   a time the clocks skip: the server moves it forward, dimlog gives it no instant (it
   does not survive the way back to local time). A date is its day's first instant.
   NULL, ±infinity and skipped times are no usable timestamp (`bad`). #}
{% macro at(x) %}{% if at_local and not at_date %}(CASE WHEN (({{ x }}) AT TIME ZONE '{{ tz }}') AT TIME ZONE '{{ tz }}' = ({{ x }}) THEN ({{ x }}) AT TIME ZONE '{{ tz }}' END){% elif at_local %}(({{ x }})::timestamp AT TIME ZONE '{{ tz }}'){% else %}{{ x }}{% endif %}{% endmacro %}
{% macro bad(x) %}({{ x }} IS NULL OR NOT isfinite({{ x }}){% if at_local and not at_date %} OR {{ at(x) }} IS NULL{% endif %}){% endmacro %}
{# One key's surrogate key: each key value (canonical text, see lookup::canonical_key)
   is cast to its column's type without the modifier (`key_casts`), so PostgreSQL
   compares values and neither rounds nor truncates the value given. #}
-- statement: one
SELECT dimlog_d.{{ sk }}::text FROM {{ dim }} dimlog_d
WHERE {% for c in key_defs %}dimlog_d.{{ c.name }} = CAST(${{ loop.index }} AS {{ key_casts[loop.index0] }}) AND {% endfor %}dimlog_d.valid_from <= ${{ key_defs|length + 1 }} AND ${{ key_defs|length + 1 }} < dimlog_d.valid_to
-- statement: fact_columns
SELECT dimlog_a.attname::text, format_type(dimlog_a.atttypid, dimlog_a.atttypmod)
FROM pg_attribute dimlog_a WHERE dimlog_a.attrelid = to_regclass($1) AND dimlog_a.attnum > 0 AND NOT dimlog_a.attisdropped
-- statement: add_sk_column
ALTER TABLE {{ facts }} ADD COLUMN IF NOT EXISTS {{ fact_sk }} bigint
-- statement: facts_distributed
{# Whether the fact table is distributed: never on this engine. #}
SELECT '0'
{# Not needed on this engine: its fact tables are local (see sql/citus/lookup.sql). #}
-- statement: assign_repartition
-- statement: assign_facts_seen
-- statement: assign_unknown
-- statement: assign_map
{# Not needed on this engine: `assign` reads the dimension itself (see sql/citus/lookup.sql). #}
-- statement: assign
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = dimlog_m.dimlog_sk
FROM (
    SELECT dimlog_x.ctid AS dimlog_rid, COALESCE(dimlog_d.{{ sk }}, -1) AS dimlog_sk
    FROM {{ facts }} dimlog_x
    LEFT JOIN {{ dim }} dimlog_d
      ON {% for k in fact_keys %}dimlog_d.{{ key_names[loop.index0] }} = dimlog_x.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ at("dimlog_x." ~ fact_at) }} AND {{ at("dimlog_x." ~ fact_at) }} < dimlog_d.valid_to
) dimlog_m
WHERE dimlog_f.ctid = dimlog_m.dimlog_rid AND dimlog_f.{{ fact_sk }} IS DISTINCT FROM dimlog_m.dimlog_sk
-- statement: counts
SELECT count(*) FILTER (WHERE {{ fact_sk }} <> -1)::text, count(*) FILTER (WHERE {{ fact_sk }} = -1)::text,
       count(*) FILTER (WHERE {{ bad(fact_at) }})::text
FROM {{ facts }}
-- statement: first_unknown
SELECT {% for k in fact_keys %}{{ k }}::text, {% endfor %}{{ at(facts ~ "." ~ fact_at)|pgts }} FROM {{ facts }} WHERE {{ fact_sk }} = -1
ORDER BY {{ at(facts ~ "." ~ fact_at) }}{% for k in fact_keys %}, {{ facts }}.{{ k }}{% endfor %} LIMIT 1
{# The first fact (by key) without a usable timestamp: its key, the kind of the value
   (as SQLite's typeof names it) and the value. #}
-- statement: first_bad
SELECT {% for k in fact_keys %}{{ facts }}.{{ k }}::text, {% endfor %}CASE WHEN {{ facts }}.{{ fact_at }} IS NULL THEN 'null' ELSE 'text' END, {{ facts }}.{{ fact_at }}::text
FROM {{ facts }} WHERE {{ bad(facts ~ "." ~ fact_at) }}
ORDER BY {% for k in fact_keys %}{{ facts }}.{{ k }}, {% endfor %}{{ facts }}.{{ fact_at }} NULLS FIRST LIMIT 1
-- statement: index_rows
SELECT {% for k in key_names %}dimlog_d.{{ k }}::text, {% endfor %}(extract(epoch FROM dimlog_d.valid_from) * 1000000)::bigint::text,
       (extract(epoch FROM dimlog_d.valid_to) * 1000000)::bigint::text, dimlog_d.{{ sk }}::text
FROM {{ dim }} dimlog_d
ORDER BY {{ key_names|cols("dimlog_d") }}, dimlog_d.valid_from
{# Which surrogate-key columns assign-keys filled, per dimension: a column it did not fill
   and that holds values other than NULL and -1 may be anything (quantities, ids 1..N), so
   it is not overwritten unless asked. Written in the assignment's transaction. #}
-- statement: sk_filled
SELECT count(*)::text, min(dimlog_f.{{ fact_sk }})::text FROM {{ facts }} dimlog_f
WHERE dimlog_f.{{ fact_sk }} IS NOT NULL AND dimlog_f.{{ fact_sk }} <> -1
{# One assignment of a fact table at a time (its name, quoted, in $1): a lock of the
   transaction, on the coordinator on Citus. #}
-- statement: assign_lock
SELECT pg_advisory_xact_lock(hashtextextended($1, 0))
{# Values of a surrogate-key column assign-keys filled before that it cannot have written:
   neither -1 nor a surrogate key of the dimension. #}
-- statement: sk_foreign
SELECT count(*)::text, min(dimlog_f.{{ fact_sk }})::text FROM {{ facts }} dimlog_f
WHERE dimlog_f.{{ fact_sk }} IS NOT NULL AND dimlog_f.{{ fact_sk }} <> -1
  AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_f.{{ fact_sk }})
-- statement: assigned_exists
SELECT (to_regclass('dimlog_assigned') IS NOT NULL)::int::text
-- statement: assigned_get
SELECT fact_table, sk_column FROM dimlog_assigned WHERE dimension = $1
-- statement: assigned_table
CREATE TABLE IF NOT EXISTS dimlog_assigned (
    dimension   text        NOT NULL,
    fact_table  text        NOT NULL,
    sk_column   text        NOT NULL,
    assigned_at timestamptz NOT NULL,
    PRIMARY KEY (dimension, fact_table, sk_column)
)
-- statement: assigned_put
INSERT INTO dimlog_assigned (dimension, fact_table, sk_column, assigned_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (dimension, fact_table, sk_column) DO UPDATE SET assigned_at = excluded.assigned_at
-- statement: owned_tables
SELECT dimension, log_table, dimension_table FROM dimlog_dimensions
-- statement: drop_at_parsed
{# Not needed on this engine: fact times are compared as typed values, never parsed into a table. #}
-- statement: drop_key_map
{# Not needed on this engine: fact keys are compared as typed values, never mapped in a table. #}
