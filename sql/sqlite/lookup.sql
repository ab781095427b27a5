{# Surrogate-key lookup for fact loaders: the version with valid_from <= ts < valid_to.
   Fact timestamps are compared as dimlog's fixed-width UTC text; other RFC 3339 forms
   are normalised first: strftime converts the text without its fraction to UTC (it
   would round a fraction to milliseconds, and .9999 up into the next second), and the
   fraction is carried over from the text (an offset moves whole minutes only), padded
   to 6 digits. #}
{# `at(x)`: a fact's timestamp as fixed-width UTC text, or NULL when it is no usable
   timestamp (NULL, a number, text that is not a time, a time without a zone). RFC 3339
   text with `Z` or `±hh:mm` whose date and time exist is read here (`fast_ok`, never
   NULL: a time strftime cannot read, like a leap second `23:59:60`, goes to Rust); every
   other text was read in Rust, by the parser `lookup --at` and the extract use (with
   source.timezone for a time without a zone), into `dimlog_at_parsed`. #}
{% macro fast_ok(x) %}(typeof({{ x }}) = 'text'
  AND {{ x }} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][T ][0-9][0-9]:[0-9][0-9]:[0-9][0-9]*'
  AND strftime('%Y-%m-%dT%H:%M:%S', substr({{ x }}, 1, 19)) IS replace(substr({{ x }}, 1, 19), ' ', 'T')
  AND ((length({{ x }}) = 20 AND {{ x }} GLOB '*Z')
       OR (length({{ x }}) = 25 AND {{ x }} GLOB '*[+-][0-9][0-9]:[0-9][0-9]')
       OR (substr({{ x }}, 20, 1) = '.' AND {{ x }} GLOB '*Z' AND length({{ x }}) > 21
           AND substr({{ x }}, 21, length({{ x }}) - 21) NOT GLOB '*[^0-9]*')
       OR (substr({{ x }}, 20, 1) = '.' AND {{ x }} GLOB '*[+-][0-9][0-9]:[0-9][0-9]' AND length({{ x }}) > 26
           AND substr({{ x }}, 21, length({{ x }}) - 26) NOT GLOB '*[^0-9]*'))){% endmacro %}
{% macro at(x) %}(CASE WHEN {{ fast_ok(x) }} THEN {{ canon(x) }}
 WHEN typeof({{ x }}) = 'text' THEN (SELECT dimlog_p.dimlog_utc FROM dimlog_at_parsed dimlog_p WHERE dimlog_p.dimlog_raw = {{ x }}) END){% endmacro %}
{% macro canon(x) %}(CASE WHEN {{ x }} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z' THEN {{ x }}
 WHEN {{ x }} GLOB '*Z' AND instr({{ x }}, '.') > 0 THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ x }}, 1, instr({{ x }}, '.') - 1) || 'Z') || '.' || substr(substr({{ x }}, instr({{ x }}, '.') + 1, length({{ x }}) - instr({{ x }}, '.') - 1) || '000000', 1, 6) || 'Z'
 WHEN {{ x }} GLOB '*[+-][0-9][0-9]:[0-9][0-9]' AND instr({{ x }}, '.') > 0 THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ x }}, 1, instr({{ x }}, '.') - 1) || substr({{ x }}, -6)) || '.' || substr(substr({{ x }}, instr({{ x }}, '.') + 1, length({{ x }}) - instr({{ x }}, '.') - 6) || '000000', 1, 6) || 'Z'
 ELSE strftime('%Y-%m-%dT%H:%M:%S', {{ x }}) || '.000000Z' END){% endmacro %}
{# One key's candidate versions at ?1: `key_filters` (lookup::sqlite_key_filters) pick
   the rows whose key may be the one given in another spelling; their keys are compared
   in canonical form in Rust. #}
-- statement: one
SELECT {% for k in keys %}{{ ("dimlog_d." ~ k)|text }}, {% endfor %}CAST(dimlog_d.{{ sk }} AS TEXT) FROM {{ dim }} dimlog_d
WHERE {% for f in key_filters %}{{ f }} AND {% endfor %}dimlog_d.valid_from <= ?1 AND ?1 < dimlog_d.valid_to
ORDER BY dimlog_d.valid_from DESC, dimlog_d.{{ sk }} DESC
{# The spellings the log holds of keys that may be one key in another spelling (see
   `one`), for `history`. #}
-- statement: key_spellings
SELECT DISTINCT {% for k in keys %}{{ ("dimlog_d." ~ k)|text }}{% if not loop.last %}, {% endif %}{% endfor %} FROM {{ log }} dimlog_d
WHERE {% for f in key_filters %}{{ f }}{% if not loop.last %} AND {% endif %}{% endfor %}
-- statement: fact_columns
SELECT name, type FROM pragma_table_info(?1)
-- statement: add_sk_column
ALTER TABLE {{ facts }} ADD COLUMN {{ fact_sk }} INTEGER
{# Facts are matched to the dimension through `dimlog_key_map`: each distinct key of
   the facts (as text) with the versions of the dimension's key that is the same value
   in canonical form (lookup::canonical_key), made in Rust (map_fact_keys), so that
   assign-keys reads every spelling as `lookup` and the Index do, whatever the
   columns' affinities would make of it. #}
-- statement: key_map
CREATE TEMP TABLE dimlog_key_map ({% for k in fact_keys %}dimlog_k{{ loop.index0 }} TEXT NOT NULL, {% endfor %}dimlog_from TEXT NOT NULL, dimlog_to TEXT NOT NULL, dimlog_sk INTEGER NOT NULL)
-- statement: key_map_index
CREATE INDEX temp.dimlog_key_map_k ON dimlog_key_map ({% for k in fact_keys %}dimlog_k{{ loop.index0 }}, {% endfor %}dimlog_from)
-- statement: drop_key_map
DROP TABLE IF EXISTS temp.dimlog_key_map
-- statement: fact_keys
SELECT DISTINCT {% for k in fact_keys %}{{ k|text }}{% if not loop.last %}, {% endif %}{% endfor %} FROM {{ facts }}
WHERE {% for k in fact_keys %}{{ k }} IS NOT NULL AND typeof({{ k }}) <> 'blob'{% if not loop.last %} AND {% endif %}{% endfor %}
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
UPDATE {{ facts }}
SET {{ fact_sk }} = COALESCE((
    SELECT dimlog_m.dimlog_sk FROM temp.dimlog_key_map dimlog_m
    WHERE {% for k in fact_keys %}dimlog_m.dimlog_k{{ loop.index0 }} = {{ (facts ~ "." ~ k)|text }} AND {% endfor %}dimlog_m.dimlog_from <= {{ at(facts ~ "." ~ fact_at) }}
      AND {{ at(facts ~ "." ~ fact_at) }} < dimlog_m.dimlog_to
    ORDER BY dimlog_m.dimlog_from DESC, dimlog_m.dimlog_sk DESC LIMIT 1
), -1)
-- statement: counts
SELECT sum({{ fact_sk }} <> -1), sum({{ fact_sk }} = -1), sum({{ at(facts ~ "." ~ fact_at) }} IS NULL) FROM {{ facts }}
-- statement: first_unknown
SELECT {% for k in fact_keys %}{{ k|text }}, {% endfor %}{{ at(facts ~ "." ~ fact_at) }} FROM {{ facts }} WHERE {{ fact_sk }} = -1
ORDER BY {{ at(facts ~ "." ~ fact_at) }}{% for k in fact_keys %}, {{ k }}{% endfor %} LIMIT 1
{# The facts whose timestamp is read in Rust: text that `fast_ok` does not take. #}
-- statement: at_to_parse
SELECT DISTINCT {{ fact_at }} FROM {{ facts }} WHERE typeof({{ fact_at }}) = 'text' AND NOT {{ fast_ok(fact_at) }}
-- statement: at_parsed
CREATE TEMP TABLE dimlog_at_parsed (dimlog_raw TEXT PRIMARY KEY, dimlog_utc TEXT NOT NULL)
-- statement: drop_at_parsed
DROP TABLE IF EXISTS temp.dimlog_at_parsed
{# The first fact (by key) without a usable timestamp: its key, the type of the value
   (SQLite's typeof) and the value. #}
-- statement: first_bad
SELECT {% for k in fact_keys %}{{ k|text }}, {% endfor %}typeof({{ fact_at }}), CAST({{ fact_at }} AS TEXT)
FROM {{ facts }} WHERE {{ at(facts ~ "." ~ fact_at) }} IS NULL
ORDER BY {% for k in fact_keys %}{{ k }}, {% endfor %}{{ fact_at }} IS NOT NULL, CAST({{ fact_at }} AS TEXT) LIMIT 1
-- statement: index_rows
SELECT {% for k in keys %}{{ ("dimlog_d." ~ k)|text }}, {% endfor %}dimlog_d.valid_from, dimlog_d.valid_to, CAST(dimlog_d.{{ sk }} AS TEXT)
FROM {{ dim }} dimlog_d
ORDER BY {{ keys|cols("dimlog_d") }}, dimlog_d.valid_from
{# Which surrogate-key columns assign-keys filled, per dimension: a column it did not fill
   and that holds values other than NULL and -1 may be anything (quantities, ids 1..N), so
   it is not overwritten unless asked. Written in the assignment's transaction. #}
-- statement: sk_filled
SELECT CAST(count(*) AS TEXT), CAST(min({{ fact_sk }}) AS TEXT) FROM {{ facts }}
WHERE {{ fact_sk }} IS NOT NULL AND NOT (typeof({{ fact_sk }}) = 'integer' AND {{ fact_sk }} = -1)
{# The write transaction is the lock already; $1 is unused. #}
-- statement: assign_lock
SELECT ?1 WHERE 0
{# Values of a surrogate-key column assign-keys filled before that it cannot have written:
   neither the integer -1 nor a surrogate key of the dimension. #}
-- statement: sk_foreign
SELECT CAST(count(*) AS TEXT), CAST(min(dimlog_f.{{ fact_sk }}) AS TEXT) FROM {{ facts }} dimlog_f
WHERE dimlog_f.{{ fact_sk }} IS NOT NULL AND NOT (typeof(dimlog_f.{{ fact_sk }}) = 'integer' AND dimlog_f.{{ fact_sk }} = -1)
  AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_f.{{ fact_sk }} AND typeof(dimlog_f.{{ fact_sk }}) = 'integer')
-- statement: assigned_exists
SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_assigned'
-- statement: assigned_get
SELECT fact_table, sk_column FROM dimlog_assigned WHERE dimension = ?1
-- statement: assigned_table
CREATE TABLE IF NOT EXISTS dimlog_assigned (
    dimension   TEXT NOT NULL,
    fact_table  TEXT NOT NULL,
    sk_column   TEXT NOT NULL,
    assigned_at TEXT NOT NULL,
    PRIMARY KEY (dimension, fact_table, sk_column)
)
-- statement: assigned_put
INSERT INTO dimlog_assigned (dimension, fact_table, sk_column, assigned_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (dimension, fact_table, sk_column) DO UPDATE SET assigned_at = excluded.assigned_at
-- statement: owned_tables
SELECT dimension, log_table, dimension_table FROM dimlog_dimensions
