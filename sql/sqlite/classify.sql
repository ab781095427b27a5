{# Compare every staged row with its predecessor P: the effective version (latest log
   row per key and valid_from, Type 1 observations excluded) with the greatest
   valid_from <= t, or an earlier staged row of the same key. Keys are touched only
   through the staged key list. A row that changes only Type 1 columns, and is the key's
   newest observation, is recorded as a Type 1 row (no surrogate key, no version). #}
{# Fixed-width UTC text plus one microsecond. #}
{% macro plus_1us(e) %}(CASE WHEN substr({{ e }}, 21, 6) = '999999' THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ e }}, 1, 19), '+1 second') || '.000000Z' ELSE substr({{ e }}, 1, 20) || printf('%06d', CAST(substr({{ e }}, 21, 6) AS INTEGER) + 1) || 'Z' END){% endmacro %}
{% macro newest(col) %}(SELECT dimlog_n.{{ col }} FROM {{ log }} dimlog_n
     WHERE {{ keys|eqs("dimlog_n", "dimlog_s") }} AND (dimlog_n.is_deleted OR dimlog_n.{{ sk }} IS NOT NULL)
     ORDER BY dimlog_n.valid_from DESC, dimlog_n.log_id DESC LIMIT 1){% endmacro %}
-- statement: classify
CREATE TEMP TABLE dimlog_changes AS
WITH dimlog_staged_keys AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
dimlog_effective AS (
    SELECT {{ keys|cols }}, valid_from, dimlog_sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}
    FROM (
        SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from, dimlog_l.{{ sk }} AS dimlog_sk, dimlog_l.is_deleted, dimlog_l.row_hash{% for a in attrs %}, dimlog_l.{{ a }}{% endfor %},
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
        FROM {{ log }} dimlog_l
        JOIN dimlog_staged_keys dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
        WHERE dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL
    ) dimlog_x
    WHERE dimlog_rn = 1
),
{% if t1 %}
dimlog_newest_observation AS (
    SELECT {{ keys|cols }}, valid_from{% for c in t1 %}, {{ c }}{% endfor %}
    FROM (
        SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %},
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }} ORDER BY dimlog_l.valid_from DESC, dimlog_l.log_id DESC) AS dimlog_rn
        FROM {{ log }} dimlog_l
        JOIN dimlog_staged_keys dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
        WHERE NOT dimlog_l.is_deleted
    ) dimlog_x
    WHERE dimlog_rn = 1
),
{% endif %}
dimlog_combined AS (
    SELECT {{ keys|cols }}, valid_from, dimlog_sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 0 AS dimlog_src
    FROM dimlog_effective
    UNION ALL
    SELECT {{ keys|cols }}, valid_from, NULL, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 1 AS dimlog_src
    FROM dimlog_stage dimlog_s
{% if unique_key %}
    WHERE EXISTS (SELECT 1 FROM dimlog_effective dimlog_e WHERE {{ keys|eqs("dimlog_e", "dimlog_s") }})
{% endif %}
),
dimlog_sequenced AS (
    SELECT dimlog_c.*,
           LAG(valid_from) OVER dimlog_w AS dimlog_p_valid_from,
           LAG(dimlog_sk)  OVER dimlog_w AS dimlog_p_sk,
           LAG(is_deleted) OVER dimlog_w AS dimlog_p_deleted,
           LAG(row_hash)   OVER dimlog_w AS dimlog_p_hash,
           MAX(CASE WHEN dimlog_src = 0 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS dimlog_newest_logged,
           MAX(CASE WHEN dimlog_src = 1 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS dimlog_newest_staged
    FROM dimlog_combined dimlog_c
    WINDOW dimlog_w AS (PARTITION BY {{ keys|cols }} ORDER BY valid_from, dimlog_src)
),
dimlog_decided AS (
    SELECT dimlog_s.*,
           CASE
               WHEN is_deleted THEN CASE WHEN dimlog_p_deleted THEN NULL ELSE 'tombstone' END
               WHEN dimlog_p_valid_from IS NULL OR dimlog_p_deleted THEN 'version'
               WHEN dimlog_p_hash = row_hash THEN NULL
               WHEN dimlog_p_valid_from = valid_from THEN 'correction'
               ELSE 'version'
           END AS dimlog_change_kind
    FROM dimlog_sequenced dimlog_s
    WHERE dimlog_src = 1
),
dimlog_typed AS (
    SELECT dimlog_d.*,
           CASE
               WHEN dimlog_d.dimlog_change_kind IS NOT NULL THEN dimlog_d.dimlog_change_kind
{% if t1 %}
               WHEN NOT dimlog_d.is_deleted AND dimlog_d.valid_from = dimlog_d.dimlog_newest_staged
                    AND (dimlog_n.valid_from IS NULL OR dimlog_d.valid_from >= dimlog_n.valid_from)
                    AND ({% for c in t1 %}dimlog_d.{{ c }} IS NOT dimlog_n.{{ c }}{{ " OR " if not loop.last }}{% endfor %})
               THEN 'type1'
{% endif %}
           END AS dimlog_final_kind
    FROM dimlog_decided dimlog_d
{% if t1 %}
    LEFT JOIN dimlog_newest_observation dimlog_n ON {{ keys|eqs("dimlog_n", "dimlog_d") }}
{% endif %}
)
SELECT {{ keys|cols }}, valid_from, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, dimlog_p_sk, dimlog_final_kind AS dimlog_change_kind,
       (dimlog_newest_logged IS NOT NULL AND valid_from < dimlog_newest_logged) AS dimlog_is_late
FROM dimlog_typed
WHERE dimlog_final_kind IS NOT NULL
{% if unique_key %}
UNION ALL
{# One staged row per key: a key the log has never seen has no predecessor, so its row
   opens a version (a tombstone if it is deleted) without the window above. #}
SELECT {{ keys|cols("dimlog_s") }}, dimlog_s.valid_from, dimlog_s.row_hash{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %}, NULL,
       CASE WHEN dimlog_s.is_deleted THEN 'tombstone' ELSE 'version' END, 0
FROM dimlog_stage dimlog_s
WHERE NOT EXISTS (SELECT 1 FROM dimlog_effective dimlog_e WHERE {{ keys|eqs("dimlog_e", "dimlog_s") }})
{% endif %}
-- statement: counts
SELECT sum(dimlog_change_kind = 'version'), sum(dimlog_change_kind = 'version' AND dimlog_is_late),
       sum(dimlog_change_kind = 'correction'), sum(dimlog_change_kind = 'tombstone'), sum(dimlog_change_kind = 'type1'), count(*)
FROM dimlog_changes
{# A first load into an empty log, one staged row per key: every row opens a version (a
   tombstone if it is deleted), so nothing needs comparing. #}
-- statement: first_counts
SELECT count(*) - count(CASE WHEN is_deleted THEN 1 END), count(CASE WHEN is_deleted THEN 1 END), count(*)
FROM dimlog_stage
-- statement: rehash
CREATE TEMP TABLE dimlog_rehashed AS
SELECT {{ keys|cols("dimlog_s") }}, dimlog_d.{{ sk }} AS dimlog_sk, dimlog_d.valid_from{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %}, dimlog_s.row_hash
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted
{% for c in retained %}
  AND dimlog_s.{{ c }} IS dimlog_d.{{ c }}
{% endfor %}
-- statement: rehash_count
SELECT count(*) FROM dimlog_rehashed
{# Revival (spec 1.4): a staged live row of a key whose newest effective log row is a
   tombstone at or after the row's own time is the key's state now, restored with an
   old stamp; it opens a version at the upper bound, or just after the tombstone. #}
-- statement: revive
UPDATE dimlog_stage AS dimlog_s
SET valid_from = CASE WHEN dimlog_n.valid_from < ?1 THEN ?1 ELSE {{ plus_1us("dimlog_n.valid_from") }} END
FROM (
    SELECT {{ keys|cols("dimlog_x") }}, dimlog_x.valid_from, dimlog_x.is_deleted FROM (
        SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from, dimlog_l.is_deleted,
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }} ORDER BY dimlog_l.valid_from DESC, dimlog_l.log_id DESC) AS dimlog_rn
        FROM {{ log }} dimlog_l
        WHERE (dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL)
          AND EXISTS (SELECT 1 FROM dimlog_stage dimlog_t WHERE {{ keys|eqs("dimlog_t", "dimlog_l") }})
    ) dimlog_x
    WHERE dimlog_x.dimlog_rn = 1
) AS dimlog_n
WHERE {{ keys|eqs("dimlog_s", "dimlog_n") }} AND dimlog_n.is_deleted AND NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= dimlog_n.valid_from
{# A reread of a row that revival already put back (history = "latest"): the staged row
   lies behind its key's tombstone, and the key's newest version, after the row, holds
   the same values. The source's state now is the dimension's current row; comparing the
   row with its predecessor, the tombstone, would open a late copy of it on every reread. #}
-- statement: drop_revived_rereads
DELETE FROM dimlog_stage AS dimlog_s
WHERE NOT dimlog_s.is_deleted
  AND {{ newest("row_hash") }} = dimlog_s.row_hash
  AND {{ newest("valid_from") }} > dimlog_s.valid_from
{% for c in t1 %}
  AND {{ newest(c) }} IS dimlog_s.{{ c }}
{% endfor %}
  AND (SELECT dimlog_p.is_deleted FROM {{ log }} dimlog_p
       WHERE {{ keys|eqs("dimlog_p", "dimlog_s") }} AND (dimlog_p.is_deleted OR dimlog_p.{{ sk }} IS NOT NULL)
         AND dimlog_p.valid_from <= dimlog_s.valid_from
       ORDER BY dimlog_p.valid_from DESC, dimlog_p.log_id DESC LIMIT 1)
