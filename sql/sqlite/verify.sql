{# `dimlog verify`: the invariants of the dimension and the log. Every check returns
   (offending key as text, detail) rows; `counted` counts them in the database and returns
   only the first few, so a check that finds millions costs no memory. #}
{% macro keytext(p) %}({% for k in keys %}CAST({{ p }}{{ k }} AS TEXT){{ " || ', ' || " if not loop.last }}{% endfor %}){% endmacro %}
{% macro difflist(a, b) %}rtrim({% for c in common %}CASE WHEN {{ a }}.{{ c.q }} IS NOT {{ b }}.{{ c.q }} THEN '{{ c.bare }}, ' ELSE '' END || {% endfor %}'', ', '){% endmacro %}
{% macro sk_pair(a, b) %}{{ a }}.{{ sk }} = {{ b }}.{{ sk }}{% endmacro %}
{% macro key_pair(a, b) %}{{ keys|eqs(a, b) }} AND {{ a }}.valid_from = {{ b }}.valid_from{% endmacro %}
{% macro unpaired(p, other) %}{% if by_sk %}NOT EXISTS (SELECT 1 FROM {{ other }} dimlog_o WHERE {{ sk_pair("dimlog_o", p) }}){% endif %}{% if by_sk and by_key %} AND {% endif %}{% if by_key %}NOT EXISTS (SELECT 1 FROM {{ other }} dimlog_o WHERE {{ key_pair("dimlog_o", p) }}){% endif %}{% endmacro %}
{% macro rowkey(p) %}{% if by_key %}{{ keytext(p ~ ".") }}{% else %}'surrogate key ' || CAST({{ p }}.{{ sk }} AS TEXT){% endif %}{% endmacro %}
{% macro differs(s, d) %}({{ s }}.row_hash <> {{ d }}.row_hash{% for c in t1 %} OR {{ s }}.{{ c }} IS NOT {{ d }}.{{ c }}{% endfor %}){% endmacro %}
-- statement: bad_interval
SELECT {{ keytext("d.") }}, 'valid_from ' || d.valid_from || ' is not before valid_to ' || d.valid_to
FROM {{ dim }} d WHERE d.valid_from >= d.valid_to
-- statement: overlap_or_gap
SELECT {{ keytext("x.") }},
       CASE WHEN x.valid_from < x.prev_to THEN 'version at ' || x.valid_from || ' overlaps the one before (ends ' || x.prev_to || ')'
            ELSE 'gap from ' || x.prev_to || ' to ' || x.valid_from || ' with no tombstone' END
FROM (
    SELECT d.*, LAG(d.valid_to) OVER (PARTITION BY {{ keys|cols("d") }} ORDER BY d.valid_from) AS prev_to
    FROM {{ dim }} d
) x
WHERE x.prev_to IS NOT NULL
  AND (x.valid_from < x.prev_to
       OR (x.valid_from > x.prev_to AND NOT EXISTS (
             SELECT 1 FROM {{ log }} l WHERE {{ keys|eqs("l", "x") }} AND l.valid_from = x.prev_to AND l.is_deleted)))
-- statement: current
SELECT {{ keytext("d.") }}, CAST(sum(d.is_current) AS TEXT) || ' current rows'
FROM {{ dim }} d
GROUP BY {{ keys|cols("d") }}
HAVING sum(d.is_current) > 1
    OR sum(d.is_current AND d.valid_to <> {{ sentinel }}) > 0
    OR sum(NOT d.is_current AND d.valid_to = {{ sentinel }}) > 0
-- statement: sk_reused
SELECT min(x.dimlog_key), 'surrogate key ' || CAST(x.dimlog_sk AS TEXT) || ' is shared by ' || CAST(count(*) AS TEXT) || ' versions: '
       || substr(group_concat(x.dimlog_key || ' at ' || COALESCE(CAST(x.valid_from AS TEXT), 'NULL'), ', '), 1, 400)
FROM (SELECT DISTINCT l.{{ sk }} AS dimlog_sk, {{ keytext("l.") }} AS dimlog_key, l.valid_from
      FROM {{ log }} l WHERE l.{{ sk }} IS NOT NULL ORDER BY 2, 3) x
GROUP BY x.dimlog_sk
HAVING count(*) > 1
{# Rows of the log that break its rules (what its constraints guard, and what a rebuild
   needs): a value where one is required, a fixed-width UTC valid_from, an integer
   surrogate key, a 32-byte row_hash on every version, a log_id of its own. #}
-- statement: log_rules
SELECT x.dimlog_key, 'log_id ' || COALESCE(CAST(x.log_id AS TEXT), 'NULL') || ': ' || x.dimlog_problem
FROM (
    SELECT l.log_id, ({% for k in keys %}COALESCE(CAST(l.{{ k }} AS TEXT), 'NULL'){{ " || ', ' || " if not loop.last }}{% endfor %}) AS dimlog_key,
           CASE
{% for k in key_defs %}
               WHEN l.{{ k.name }} IS NULL THEN 'key column {{ k.bare }} is NULL'
{% endfor %}
               WHEN l.log_id IS NULL THEN 'log_id is NULL'
               WHEN l.valid_from IS NULL THEN 'valid_from is NULL'
               WHEN typeof(l.valid_from) <> 'text' OR l.valid_from NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z'
                   THEN 'valid_from ' || quote(l.valid_from) || ' is not a fixed-width UTC timestamp'
               WHEN l.is_deleted IS NULL THEN 'is_deleted is NULL'
               WHEN l.load_id IS NULL THEN 'load_id is NULL'
               WHEN l.{{ sk }} IS NOT NULL AND typeof(l.{{ sk }}) <> 'integer'
                   THEN '{{ sk_bare }} ' || quote(l.{{ sk }}) || ' is not an integer'
               WHEN NOT l.is_deleted AND l.{{ sk }} IS NOT NULL AND l.row_hash IS NULL THEN 'row_hash is NULL on a version'
               WHEN NOT l.is_deleted AND l.{{ sk }} IS NOT NULL AND length(CAST(l.row_hash AS BLOB)) <> 32
                   THEN 'row_hash is ' || CAST(length(CAST(l.row_hash AS BLOB)) AS TEXT) || ' bytes, not 32'
           END AS dimlog_problem
    FROM {{ log }} l
) x
WHERE x.dimlog_problem IS NOT NULL
UNION ALL
SELECT min({{ keytext("l.") }}), 'log_id ' || CAST(l.log_id AS TEXT) || ' is used by ' || CAST(count(*) AS TEXT) || ' rows'
FROM {{ log }} l WHERE l.log_id IS NOT NULL GROUP BY l.log_id HAVING count(*) > 1
{# The dimension against a fresh rebuild, row by row, on every column both have (the
   column sets are compared in Rust): a row is paired with its rebuilt twin by surrogate
   key, else (its surrogate key edited) by key and valid_from, and a pair that differs
   names the columns; a row without a twin is reported as such. #}
-- statement: rebuild_diff
WITH dimlog_pairs AS (
{% if by_sk %}
    SELECT {{ keytext("n.") }} AS dimlog_key, n.{{ sk }} AS dimlog_sk, {{ difflist("d", "n") }} AS dimlog_diff
    FROM {{ dim }} d JOIN {{ rebuilt }} n ON {{ sk_pair("d", "n") }}
{% endif %}
{% if by_sk and by_key %}
    UNION ALL
{% endif %}
{% if by_key %}
    SELECT {{ keytext("n.") }}, n.{{ sk }}, {{ difflist("d", "n") }}
    FROM {{ dim }} d JOIN {{ rebuilt }} n ON {{ key_pair("d", "n") }}
{% if by_sk %}
    WHERE NOT EXISTS (SELECT 1 FROM {{ rebuilt }} dimlog_n WHERE {{ sk_pair("dimlog_n", "d") }})
      AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE {{ sk_pair("dimlog_d", "n") }})
{% endif %}
{% endif %}
)
SELECT dimlog_key, 'surrogate key ' || CAST(dimlog_sk AS TEXT) || ': ' || dimlog_diff
       || CASE WHEN instr(dimlog_diff, ',') > 0 THEN ' differ' ELSE ' differs' END || ' from a fresh rebuild'
FROM dimlog_pairs WHERE dimlog_diff <> ''
UNION ALL
SELECT {{ rowkey("d") }}, 'dimension has a row a fresh rebuild does not (surrogate key ' || COALESCE(CAST(d.{{ sk }} AS TEXT), 'NULL') || ')'
FROM {{ dim }} d WHERE {{ unpaired("d", rebuilt) }}
UNION ALL
SELECT {{ keytext("n.") }}, 'a fresh rebuild has surrogate key ' || CAST(n.{{ sk }} AS TEXT) || ', the dimension has no such row'
FROM {{ rebuilt }} n WHERE {{ unpaired("n", dim) }}
{# The table a fresh rebuild is derived into: the dimension's columns and types, none of
   its constraints, so a log edited by hand (two versions sharing a surrogate key, a
   NULL row_hash) still rebuilds and is reported instead of failing the command. #}
-- statement: rebuilt_table
CREATE TEMP TABLE dimlog_verify_rebuilt (
    {{ sk }} INTEGER,
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in current_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from TEXT,
    valid_to   TEXT,
    is_current BOOLEAN,
    row_hash   BLOB,
    load_id    INTEGER
)
-- statement: rebuilt_index
CREATE INDEX dimlog_verify_rebuilt_sk ON dimlog_verify_rebuilt ({{ sk }})
-- statement: rebuilt_key_index
CREATE INDEX dimlog_verify_rebuilt_key ON dimlog_verify_rebuilt ({{ keys|cols }}, valid_from)
{# The staged source, looked up by key from the dimension's side. #}
-- statement: stage_index
CREATE INDEX temp.dimlog_stage_key ON dimlog_stage ({{ keys|cols }})
-- statement: table_columns
SELECT name, type FROM pragma_table_info(?1, ?2) ORDER BY cid
-- statement: last_upper
SELECT max(upper_bound) FROM dimlog_runs
WHERE dimension = ?1 AND status = 'succeeded' AND kind IN ('incremental', 'full-refresh')
{# The source checks compare the source's rows read up to the last run's upper bound
   (?1) with the dimension's current rows; a row stamped later is not read yet
   (`source_ahead`), and ?2 is the source's clock. #}
-- statement: source_ahead
SELECT {{ keytext("s.") }},
       CASE WHEN s.is_deleted THEN 'deleted in the source at ' ELSE 'source row stamped ' END || s.valid_from
       || CASE WHEN s.valid_from > ?2
               THEN ', later than the source''s clock (' || ?2 || '): no run reads it before the clock reaches that time (is the source''s clock or this updated_at wrong?)'
               ELSE ', after the last run''s upper bound ' || ?1 || ': not read yet, the next run reads it' END
FROM dimlog_stage s
LEFT JOIN {{ dim }} d ON d.is_current AND {{ keys|eqs("d", "s") }}
WHERE s.valid_from > ?1
  AND CASE WHEN s.is_deleted THEN d.is_current IS NOT NULL ELSE d.is_current IS NULL OR {{ differs("s", "d") }} END
-- statement: source_missing
SELECT {{ keytext("s.") }}, 'in the source, not current in the dimension'
FROM dimlog_stage s
WHERE NOT s.is_deleted AND s.valid_from <= ?1 AND NOT EXISTS (SELECT 1 FROM {{ dim }} d WHERE d.is_current AND {{ keys|eqs("d", "s") }})
-- statement: source_extra
SELECT {{ keytext("d.") }}, 'current in the dimension, not in the source'
FROM {{ dim }} d
WHERE d.is_current AND NOT EXISTS (SELECT 1 FROM dimlog_stage s WHERE (NOT s.is_deleted OR s.valid_from > ?1) AND {{ keys|eqs("d", "s") }})
-- statement: source_different
SELECT {{ keytext("s.") }}, 'tracked values differ (source updated_at ' || s.valid_from || ', dimension valid_from ' || d.valid_from || ')'
FROM dimlog_stage s
JOIN {{ dim }} d ON d.is_current AND {{ keys|eqs("d", "s") }}
WHERE NOT s.is_deleted AND s.valid_from <= ?1 AND {{ differs("s", "d") }}
-- statement: counted
WITH dimlog_check AS MATERIALIZED (
{{ check }}
)
SELECT CAST((SELECT count(*) FROM dimlog_check) AS TEXT), c.* FROM dimlog_check c LIMIT {{ examples }}
