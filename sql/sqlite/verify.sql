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
SELECT {{ keytext("dimlog_d.") }}, 'valid_from ' || dimlog_d.valid_from || ' is not before valid_to ' || dimlog_d.valid_to
FROM {{ dim }} dimlog_d WHERE dimlog_d.valid_from >= dimlog_d.valid_to
-- statement: overlap_or_gap
SELECT {{ keytext("dimlog_x.") }},
       CASE WHEN dimlog_x.valid_from < dimlog_x.dimlog_prev_to THEN 'version at ' || dimlog_x.valid_from || ' overlaps the one before (ends ' || dimlog_x.dimlog_prev_to || ')'
            ELSE 'gap from ' || dimlog_x.dimlog_prev_to || ' to ' || dimlog_x.valid_from || ' with no tombstone' END
FROM (
    SELECT dimlog_d.*, LAG(dimlog_d.valid_to) OVER (PARTITION BY {{ keys|cols("dimlog_d") }} ORDER BY dimlog_d.valid_from) AS dimlog_prev_to
    FROM {{ dim }} dimlog_d
) dimlog_x
WHERE dimlog_x.dimlog_prev_to IS NOT NULL
  AND (dimlog_x.valid_from < dimlog_x.dimlog_prev_to
       OR (dimlog_x.valid_from > dimlog_x.dimlog_prev_to AND NOT EXISTS (
             SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_x") }} AND dimlog_l.valid_from = dimlog_x.dimlog_prev_to AND dimlog_l.is_deleted)))
-- statement: current
SELECT {{ keytext("dimlog_d.") }}, CAST(sum(dimlog_d.is_current) AS TEXT) || ' current rows'
FROM {{ dim }} dimlog_d
GROUP BY {{ keys|cols("dimlog_d") }}
HAVING sum(dimlog_d.is_current) > 1
    OR sum(dimlog_d.is_current AND dimlog_d.valid_to <> {{ sentinel }}) > 0
    OR sum(NOT dimlog_d.is_current AND dimlog_d.valid_to = {{ sentinel }}) > 0
-- statement: sk_reused
SELECT min(dimlog_x.dimlog_key), 'surrogate key ' || CAST(dimlog_x.dimlog_sk AS TEXT) || ' is shared by ' || CAST(count(*) AS TEXT) || ' versions: '
       || substr(group_concat(dimlog_x.dimlog_key || ' at ' || COALESCE(CAST(dimlog_x.valid_from AS TEXT), 'NULL'), ', '), 1, 400)
FROM (SELECT DISTINCT dimlog_l.{{ sk }} AS dimlog_sk, {{ keytext("dimlog_l.") }} AS dimlog_key, dimlog_l.valid_from
      FROM {{ log }} dimlog_l WHERE dimlog_l.{{ sk }} IS NOT NULL ORDER BY 2, 3) dimlog_x
GROUP BY dimlog_x.dimlog_sk
HAVING count(*) > 1
{# Surrogate keys of the log's versions with no row in the dimension (issue 21): facts may
   hold them. A tombstone logged later at the same valid_from replaced the version (a log
   written before same-instant deletes moved 1 µs after the version), or the dimension
   lost the row. #}
-- statement: sk_missing
SELECT {{ keytext("dimlog_x.") }}, 'surrogate key ' || CAST(dimlog_x.dimlog_sk AS TEXT) || ' (valid_from ' || COALESCE(dimlog_x.valid_from, 'NULL')
       || ') is a version in the log with no row in the dimension'
       || CASE WHEN EXISTS (SELECT 1 FROM {{ log }} dimlog_t
                            WHERE {{ keys|eqs("dimlog_t", "dimlog_x") }} AND dimlog_t.valid_from = dimlog_x.valid_from
                              AND dimlog_t.is_deleted AND dimlog_t.log_id > dimlog_x.dimlog_last)
               THEN ': a tombstone logged later at the same valid_from replaced it' ELSE '' END
FROM (
    SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.{{ sk }} AS dimlog_sk, min(dimlog_l.valid_from) AS valid_from, max(dimlog_l.log_id) AS dimlog_last
    FROM {{ log }} dimlog_l
    WHERE dimlog_l.{{ sk }} IS NOT NULL AND NOT dimlog_l.is_deleted
      AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_l.{{ sk }})
    GROUP BY {{ keys|cols("dimlog_l") }}, dimlog_l.{{ sk }}
) dimlog_x
{# Rows of the log that break its rules (what its constraints guard, and what a rebuild
   needs): a value where one is required, a fixed-width UTC valid_from, an integer
   surrogate key, a 32-byte row_hash on every version, a log_id of its own. #}
-- statement: log_rules
SELECT dimlog_x.dimlog_key, 'log_id ' || COALESCE(CAST(dimlog_x.log_id AS TEXT), 'NULL') || ': ' || dimlog_x.dimlog_problem
FROM (
    SELECT dimlog_l.log_id, ({% for k in keys %}COALESCE(CAST(dimlog_l.{{ k }} AS TEXT), 'NULL'){{ " || ', ' || " if not loop.last }}{% endfor %}) AS dimlog_key,
           CASE
{% for k in key_defs %}
               WHEN dimlog_l.{{ k.name }} IS NULL THEN 'key column {{ k.bare }} is NULL'
{% endfor %}
               WHEN dimlog_l.log_id IS NULL THEN 'log_id is NULL'
               WHEN dimlog_l.valid_from IS NULL THEN 'valid_from is NULL'
               WHEN typeof(dimlog_l.valid_from) <> 'text' OR dimlog_l.valid_from NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z'
                   THEN 'valid_from ' || quote(dimlog_l.valid_from) || ' is not a fixed-width UTC timestamp'
               WHEN dimlog_l.is_deleted IS NULL THEN 'is_deleted is NULL'
               WHEN dimlog_l.load_id IS NULL THEN 'load_id is NULL'
               WHEN dimlog_l.{{ sk }} IS NOT NULL AND typeof(dimlog_l.{{ sk }}) <> 'integer'
                   THEN '{{ sk_bare }} ' || quote(dimlog_l.{{ sk }}) || ' is not an integer'
               WHEN NOT dimlog_l.is_deleted AND dimlog_l.{{ sk }} IS NOT NULL AND dimlog_l.row_hash IS NULL THEN 'row_hash is NULL on a version'
               WHEN NOT dimlog_l.is_deleted AND dimlog_l.{{ sk }} IS NOT NULL AND length(CAST(dimlog_l.row_hash AS BLOB)) <> 32
                   THEN 'row_hash is ' || CAST(length(CAST(dimlog_l.row_hash AS BLOB)) AS TEXT) || ' bytes, not 32'
           END AS dimlog_problem
    FROM {{ log }} dimlog_l
) dimlog_x
WHERE dimlog_x.dimlog_problem IS NOT NULL
UNION ALL
SELECT min({{ keytext("dimlog_l.") }}), 'log_id ' || CAST(dimlog_l.log_id AS TEXT) || ' is used by ' || CAST(count(*) AS TEXT) || ' rows'
FROM {{ log }} dimlog_l WHERE dimlog_l.log_id IS NOT NULL GROUP BY dimlog_l.log_id HAVING count(*) > 1
{# The dimension against a fresh rebuild (`dim_new`, rebuild.sql's `rebuilt`), row by
   row, on every column both have (the column sets are compared in Rust): a row is
   paired with its rebuilt twin by surrogate key, else (its surrogate key edited) by key
   and valid_from, and a pair that differs names the columns; a row without a twin is
   reported as such. #}
-- statement: rebuild_diff
SELECT dimlog_p.dimlog_key, 'surrogate key ' || CAST(dimlog_p.dimlog_sk AS TEXT) || ': ' || dimlog_p.dimlog_diff
       || CASE WHEN instr(dimlog_p.dimlog_diff, ',') > 0 THEN ' differ' ELSE ' differs' END || ' from a fresh rebuild'
FROM (
{% if by_sk %}
    SELECT {{ keytext("dimlog_n.") }} AS dimlog_key, dimlog_n.{{ sk }} AS dimlog_sk, {{ difflist("dimlog_d", "dimlog_n") }} AS dimlog_diff
    FROM {{ dim }} dimlog_d JOIN {{ dim_new }} dimlog_n ON {{ sk_pair("dimlog_d", "dimlog_n") }}
{% endif %}
{% if by_sk and by_key %}
    UNION ALL
{% endif %}
{% if by_key %}
    SELECT {{ keytext("dimlog_n.") }}, dimlog_n.{{ sk }}, {{ difflist("dimlog_d", "dimlog_n") }}
    FROM {{ dim }} dimlog_d JOIN {{ dim_new }} dimlog_n ON {{ key_pair("dimlog_d", "dimlog_n") }}
{% if by_sk %}
    WHERE NOT EXISTS (SELECT 1 FROM {{ dim_new }} dimlog_o WHERE {{ sk_pair("dimlog_o", "dimlog_d") }})
      AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_o WHERE {{ sk_pair("dimlog_o", "dimlog_n") }})
{% endif %}
{% endif %}
) dimlog_p
WHERE dimlog_p.dimlog_diff <> ''
UNION ALL
SELECT {{ rowkey("dimlog_d") }}, 'dimension has a row a fresh rebuild does not (surrogate key ' || COALESCE(CAST(dimlog_d.{{ sk }} AS TEXT), 'NULL') || ')'
FROM {{ dim }} dimlog_d WHERE {{ unpaired("dimlog_d", dim_new) }}
UNION ALL
SELECT {{ keytext("dimlog_n.") }}, 'a fresh rebuild has surrogate key ' || CAST(dimlog_n.{{ sk }} AS TEXT) || ', the dimension has no such row'
FROM {{ dim_new }} dimlog_n WHERE {{ unpaired("dimlog_n", dim) }}
{# The source checks compare the source's rows read up to the last run's upper bound
   (?1) with the dimension's current rows; a row stamped later is not read yet
   (`source_ahead`), and ?2 is the source's clock. #}
-- statement: source_ahead
SELECT {{ keytext("dimlog_s.") }},
       CASE WHEN dimlog_s.is_deleted THEN 'deleted in the source at ' ELSE 'source row stamped ' END || dimlog_s.valid_from
       || CASE WHEN dimlog_s.valid_from > ?2
               THEN ', later than the source''s clock (' || ?2 || '): no run reads it before the clock reaches that time (is the source''s clock or this updated_at wrong?)'
               ELSE ', after the last run''s upper bound ' || ?1 || ': not read yet, the next run reads it' END
FROM dimlog_stage dimlog_s
LEFT JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE dimlog_s.valid_from > ?1
  AND CASE WHEN dimlog_s.is_deleted THEN dimlog_d.is_current IS NOT NULL ELSE dimlog_d.is_current IS NULL OR {{ differs("dimlog_s", "dimlog_d") }} END
-- statement: source_missing
SELECT {{ keytext("dimlog_s.") }}, 'in the source, not current in the dimension'
FROM dimlog_stage dimlog_s
WHERE NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= ?1
  AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }})
-- statement: source_extra
SELECT {{ keytext("dimlog_d.") }}, 'current in the dimension, not in the source'
FROM {{ dim }} dimlog_d
WHERE dimlog_d.is_current AND NOT EXISTS (
    SELECT 1 FROM dimlog_stage dimlog_s WHERE (NOT dimlog_s.is_deleted OR dimlog_s.valid_from > ?1) AND {{ keys|eqs("dimlog_d", "dimlog_s") }})
-- statement: source_different
SELECT {{ keytext("dimlog_s.") }}, 'tracked values differ (source updated_at ' || dimlog_s.valid_from || ', dimension valid_from ' || dimlog_d.valid_from || ')'
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= ?1 AND dimlog_s.valid_from >= dimlog_d.valid_from
  AND {{ differs("dimlog_s", "dimlog_d") }}
{# A source row stamped before its key's current version, with other values: its
   updated_at moved backwards (spec 4: reported, since source and dimension disagree). The
   dimension holds it as a late version, or a full refresh loads it as one; the current
   version stays the newer one either way, so the fix is at the source. #}
-- statement: source_behind
SELECT {{ keytext("dimlog_s.") }}, 'source row stamped ' || dimlog_s.valid_from || ', before the current version of ' || dimlog_d.valid_from || ' (its updated_at moved backwards)'
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= ?1 AND dimlog_s.valid_from < dimlog_d.valid_from
  AND {{ differs("dimlog_s", "dimlog_d") }}
-- statement: stage_index
CREATE INDEX temp.dimlog_stage_key ON dimlog_stage ({{ keys|cols }})
-- statement: table_columns
SELECT name, type FROM pragma_table_info(?1, ?2) ORDER BY cid
{# The last run's, not the greatest: a run with an earlier `--upper` leaves what is
   stamped after it to the next run, whose window starts at or before it. #}
-- statement: last_upper
SELECT upper_bound FROM dimlog_runs
WHERE dimension = ?1 AND status = 'succeeded' AND kind IN ('incremental', 'full-refresh')
ORDER BY run_id DESC LIMIT 1
{# `rebuilt`, when the check compares with a fresh rebuild: rebuild.sql's `rebuilt`. #}
-- statement: counted
WITH {% if rebuilt %}{{ rebuilt }},
{% endif %}dimlog_check AS MATERIALIZED (
{{ check }}
)
SELECT CAST((SELECT count(*) FROM dimlog_check) AS TEXT), dimlog_c.* FROM dimlog_check dimlog_c ORDER BY 2, 3 LIMIT {{ examples }}
