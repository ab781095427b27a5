{# Append the classified changes to the log. Surrogate keys and log ids come from a
   block reserved in dimlog_dimensions (bound values, no sequences), loaded_at is bound
   too, so a distributed engine can run the same statement on its shards. They are
   numbered in key order (`key_order`: text keys bytewise, COLLATE "C", so the numbers
   do not depend on the database's collation and match SQLite's), then valid_from. #}
-- statement: reserve
SELECT next_surrogate_key::text, next_log_id::text FROM dimlog_dimensions WHERE dimension = $1 FOR UPDATE
{# What a load appends, kept for its rebuild (see `history` in classify.sql). #}
-- statement: appended_table
CREATE TEMP TABLE dimlog_appended ON COMMIT DROP AS
SELECT log_id, {{ sk }}, {{ keys|cols }}{% for a in attrs %}, {{ a }}{% endfor %}, valid_from, is_deleted, row_hash, load_id
FROM {{ log }} WITH NO DATA
-- statement: append
WITH dimlog_inserted AS (
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT $1 + ROW_NUMBER() OVER dimlog_w - 1,
       CASE
           WHEN dimlog_change_kind = 'version' THEN $2 + SUM(CASE WHEN dimlog_change_kind = 'version' THEN 1 ELSE 0 END) OVER dimlog_w - 1
           WHEN dimlog_change_kind = 'correction' THEN dimlog_p_sk
       END,
       {{ keys|cols }},
{% for a in attrs %}
       CASE WHEN dimlog_change_kind = 'tombstone' THEN NULL ELSE {{ a }} END,
{% endfor %}
       valid_from,
       dimlog_change_kind = 'tombstone',
       CASE WHEN dimlog_change_kind = 'tombstone' THEN NULL ELSE row_hash END,
       $3,
       $4
FROM dimlog_changes
WINDOW dimlog_w AS (ORDER BY {{ key_order|join(", ") }}, valid_from ROWS UNBOUNDED PRECEDING)
RETURNING log_id, {{ sk }}, {{ keys|cols }}{% for a in attrs %}, {{ a }}{% endfor %}, valid_from, is_deleted, row_hash, load_id
)
INSERT INTO dimlog_appended SELECT * FROM dimlog_inserted
{# A first load (empty log, one staged row per key) appends the staged rows as they
   are, numbered in the same order as `append`, without classifying them first. #}
-- statement: append_first
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
{% if tombstones %}
SELECT $1 + ROW_NUMBER() OVER dimlog_w - 1,
       CASE WHEN is_deleted THEN NULL ELSE $2 + SUM(CASE WHEN is_deleted THEN 0 ELSE 1 END) OVER dimlog_w - 1 END,
       {{ keys|cols }},
{% for a in attrs %}
       CASE WHEN is_deleted THEN NULL ELSE {{ a }} END,
{% endfor %}
       valid_from, is_deleted, CASE WHEN is_deleted THEN NULL ELSE row_hash END, $3, $4
FROM dimlog_stage
WINDOW dimlog_w AS (ORDER BY {{ key_order|join(", ") }}, valid_from ROWS UNBOUNDED PRECEDING)
{% else %}
SELECT $1 + dimlog_n - 1, $2 + dimlog_n - 1, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, $3, $4
FROM (SELECT dimlog_s.*, ROW_NUMBER() OVER (ORDER BY {{ key_order|join(", ") }}, valid_from) AS dimlog_n FROM dimlog_stage dimlog_s) dimlog_numbered
{% endif %}
-- statement: advance
UPDATE dimlog_dimensions
SET next_surrogate_key = next_surrogate_key + $2, next_log_id = next_log_id + $3, built_through_load = $4, updated_at = $5
WHERE dimension = $1
{# The earlier versions a load carries over to the new Type 2 column set (`stale` in
   classify.sql), before its classified rows: same surrogate key, valid_from and logged
   values, the new hash. #}
-- statement: stale_append
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT $1 + dimlog_n - 1, dimlog_sk, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, false, row_hash, $2, $3
FROM dimlog_stale
-- statement: is_empty
SELECT CASE WHEN EXISTS (SELECT 1 FROM {{ log }}) THEN '0' ELSE '1' END
-- statement: rehash_append
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT $1 + ROW_NUMBER() OVER (ORDER BY {{ key_order|join(", ") }}) - 1, dimlog_sk, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, false, row_hash, $2, $3
FROM dimlog_rehashed
{# Not needed on this engine: `append` numbers the changes in one statement (see
   sql/citus/append.sql). #}
-- statement: key_offsets
-- statement: append_by_offsets
-- statement: append_kept
