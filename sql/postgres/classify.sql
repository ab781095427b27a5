{# Compare every staged row with its predecessor P: the effective version (latest log
   row per key and valid_from, Type 1 observations excluded) with the greatest
   valid_from <= t, or an earlier staged row of the same key. Keys are touched only
   through the staged key list. A row that changes only Type 1 columns, and is the key's
   newest observation, is recorded as a Type 1 row (no surrogate key, no version). #}
{# The staged keys' effective versions, read from the log once: classify compares with
   them, and the rebuild derives the touched keys' rows from them and the rows this load
   appends (`dimlog_appended`) instead of reading the log again. #}
-- statement: history
CREATE TEMP TABLE dimlog_history ON COMMIT DROP AS
SELECT DISTINCT ON ({{ keys|cols("l") }}, l.valid_from)
       l.log_id, l.{{ sk }}, {{ keys|cols("l") }}{% for a in attrs %}, l.{{ a }}{% endfor %}, l.valid_from, l.is_deleted, l.row_hash, l.load_id
FROM {{ log }} l
JOIN (SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage) t ON {{ keys|eqs("l", "t") }}
WHERE l.is_deleted OR l.{{ sk }} IS NOT NULL
ORDER BY {{ keys|cols("l") }}, l.valid_from, l.log_id DESC
{# Revival (spec 1.4): a staged live row of a key whose newest effective log row is a
   tombstone at or after the row's own time is the key's state now, restored with an
   old stamp; it opens a version at the upper bound, or just after the tombstone. #}
-- statement: revive
UPDATE dimlog_stage s
SET valid_from = GREATEST($1::timestamptz, n.valid_from + interval '1 microsecond')
FROM (
    SELECT DISTINCT ON ({{ keys|cols("l") }}) {{ keys|cols("l") }}, l.valid_from, l.is_deleted
    FROM {{ log }} l
    JOIN (SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage) t ON {{ keys|eqs("l", "t") }}
    WHERE l.is_deleted OR l.{{ sk }} IS NOT NULL
    ORDER BY {{ keys|cols("l") }}, l.valid_from DESC, l.log_id DESC
) n
WHERE {{ keys|eqs("s", "n") }} AND n.is_deleted AND NOT s.is_deleted AND s.valid_from <= n.valid_from
-- statement: classify
CREATE TEMP TABLE dimlog_changes ON COMMIT DROP AS
WITH touched AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
effective AS MATERIALIZED (
    SELECT {{ keys|cols }}, valid_from, {{ sk }} AS sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}
    FROM dimlog_history
),
{% if t1 %}
newest_observation AS (
    SELECT DISTINCT ON ({{ keys|cols("l") }}) {{ keys|cols("l") }}, l.valid_from{% for c in t1 %}, l.{{ c }}{% endfor %}
    FROM {{ log }} l
    JOIN touched t ON {{ keys|eqs("l", "t") }}
    WHERE NOT l.is_deleted
    ORDER BY {{ keys|cols("l") }}, l.valid_from DESC, l.log_id DESC
),
{% endif %}
combined AS (
    SELECT {{ keys|cols }}, valid_from, sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 0 AS src
    FROM effective
    UNION ALL
    SELECT {{ keys|cols }}, valid_from, NULL::bigint, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 1 AS src
    FROM dimlog_stage s
{% if unique_key %}
    WHERE EXISTS (SELECT 1 FROM effective e WHERE {{ keys|eqs("e", "s") }})
{% endif %}
),
sequenced AS (
    SELECT c.*,
           LAG(valid_from) OVER w AS p_valid_from,
           LAG(sk)         OVER w AS p_sk,
           LAG(is_deleted) OVER w AS p_deleted,
           LAG(row_hash)   OVER w AS p_hash,
           MAX(CASE WHEN src = 0 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS newest_logged,
           MAX(CASE WHEN src = 1 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS newest_staged
    FROM combined c
    WINDOW w AS (PARTITION BY {{ keys|cols }} ORDER BY valid_from, src)
),
decided AS (
    SELECT s.*,
           CASE
               WHEN is_deleted THEN CASE WHEN p_deleted THEN NULL ELSE 'tombstone' END
               WHEN p_valid_from IS NULL OR p_deleted THEN 'version'
               WHEN p_hash = row_hash THEN NULL
               WHEN p_valid_from = valid_from THEN 'correction'
               ELSE 'version'
           END AS change_kind
    FROM sequenced s
    WHERE src = 1
),
typed AS (
    SELECT d.*,
           CASE
               WHEN d.change_kind IS NOT NULL THEN d.change_kind
{% if t1 %}
               WHEN NOT d.is_deleted AND d.valid_from = d.newest_staged
                    AND (n.valid_from IS NULL OR d.valid_from >= n.valid_from)
                    AND ({% for c in t1 %}{% set t = "::text" if c in text_compared else "" %}d.{{ c }}{{ t }} IS DISTINCT FROM n.{{ c }}{{ t }}{{ " OR " if not loop.last }}{% endfor %})
               THEN 'type1'
{% endif %}
           END AS final_kind
    FROM decided d
{% if t1 %}
    LEFT JOIN newest_observation n ON {{ keys|eqs("n", "d") }}
{% endif %}
)
SELECT {{ keys|cols }}, valid_from, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, p_sk, final_kind AS change_kind,
       (newest_logged IS NOT NULL AND valid_from < newest_logged) AS is_late
FROM typed
WHERE final_kind IS NOT NULL
{% if unique_key %}
UNION ALL
{# One staged row per key: a key the log has never seen has no predecessor, so its row
   opens a version (a tombstone if it is deleted) without the window above. #}
SELECT {{ keys|cols("s") }}, s.valid_from, s.row_hash{% for a in attrs %}, s.{{ a }}{% endfor %}, NULL::bigint,
       CASE WHEN s.is_deleted THEN 'tombstone' ELSE 'version' END, false
FROM dimlog_stage s
WHERE NOT EXISTS (SELECT 1 FROM effective e WHERE {{ keys|eqs("e", "s") }})
{% endif %}
-- statement: counts
SELECT count(*) FILTER (WHERE change_kind = 'version')::text,
       count(*) FILTER (WHERE change_kind = 'version' AND is_late)::text,
       count(*) FILTER (WHERE change_kind = 'correction')::text,
       count(*) FILTER (WHERE change_kind = 'tombstone')::text,
       count(*) FILTER (WHERE change_kind = 'type1')::text,
       count(*)::text
FROM dimlog_changes
{# A first load into an empty log, one staged row per key: every row opens a version (a
   tombstone if it is deleted), so nothing needs comparing. #}
-- statement: first_counts
SELECT count(*) FILTER (WHERE NOT is_deleted)::text, count(*) FILTER (WHERE is_deleted)::text, count(*)::text
FROM dimlog_stage
-- statement: rehash
CREATE TEMP TABLE dimlog_rehashed ON COMMIT DROP AS
SELECT {{ keys|cols("s") }}, d.{{ sk }} AS sk, d.valid_from{% for a in attrs %}, s.{{ a }}{% endfor %}, s.row_hash
FROM dimlog_stage s
JOIN {{ dim }} d ON d.is_current AND {{ keys|eqs("d", "s") }}
WHERE NOT s.is_deleted
{% for c in retained %}
  AND s.{{ c }}{{ "::text" if c in text_compared }} IS NOT DISTINCT FROM d.{{ c }}{{ "::text" if c in text_compared }}
{% endfor %}
-- statement: rehash_count
SELECT count(*)::text FROM dimlog_rehashed
