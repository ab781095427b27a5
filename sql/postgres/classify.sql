{# Compare every staged row with its predecessor P: the effective version (latest log
   row per key and valid_from) with the greatest valid_from <= t, or an earlier staged
   row of the same key. Keys are touched only through the staged key list. #}
-- statement: classify
CREATE TEMP TABLE dimlog_changes ON COMMIT DROP AS
WITH touched AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
effective AS (
    SELECT DISTINCT ON ({{ keys|cols("l") }}, l.valid_from)
           {{ keys|cols("l") }}, l.valid_from, l.{{ sk }} AS sk, l.is_deleted, l.row_hash{% for a in attrs %}, l.{{ a }}{% endfor %}
    FROM {{ log }} l
    JOIN touched t ON {{ keys|eqs("l", "t") }}
    ORDER BY {{ keys|cols("l") }}, l.valid_from, l.log_id DESC
),
combined AS (
    SELECT {{ keys|cols }}, valid_from, sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 0 AS src
    FROM effective
    UNION ALL
    SELECT {{ keys|cols }}, valid_from, NULL::bigint, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 1 AS src
    FROM dimlog_stage
),
sequenced AS (
    SELECT c.*,
           LAG(valid_from) OVER w AS p_valid_from,
           LAG(sk)         OVER w AS p_sk,
           LAG(is_deleted) OVER w AS p_deleted,
           LAG(row_hash)   OVER w AS p_hash,
           MAX(CASE WHEN src = 0 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS newest_logged
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
)
SELECT {{ keys|cols }}, valid_from, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, p_sk, change_kind,
       (newest_logged IS NOT NULL AND valid_from < newest_logged) AS is_late
FROM decided
WHERE change_kind IS NOT NULL
-- statement: counts
SELECT count(*) FILTER (WHERE change_kind = 'version')::text,
       count(*) FILTER (WHERE change_kind = 'version' AND is_late)::text,
       count(*) FILTER (WHERE change_kind = 'correction')::text,
       count(*) FILTER (WHERE change_kind = 'tombstone')::text,
       count(*)::text
FROM dimlog_changes
