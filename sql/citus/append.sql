{# Whether the log is empty, from each shard's primary-key index (log_id first): an
   EXISTS over a distributed table is planned on the coordinator, pulling the whole log
   there to look at one row. #}
-- statement: is_empty
SELECT CASE WHEN max(log_id) IS NULL THEN '1' ELSE '0' END FROM {{ log }}
{# A small load's append on Citus, in three steps instead of `append`, whose window over
   every change in key order is computed on the coordinator, and whose rows are then
   copied to every shard over a connection per shard (0.4 s of a 3,000-row load at 32
   shards). Here the coordinator reads one row per changed key, in key order: its
   changes and versions. dimlog adds them up into each key's first log id and surrogate
   key, and sends them back as arrays ($5…), with which each shard numbers its own keys'
   changes (in valid_from order, as `append` does); the numbers are the same. #}
{# The key's text is selected under another name: `ORDER BY k` names an output column
   before an input one, and would sort the keys by their text. #}
-- statement: key_offsets
SELECT {% for k in keys %}{{ k }}::text AS dimlog_k{{ loop.index }}, {% endfor %}count(*)::text, sum(CASE WHEN dimlog_change_kind = 'version' THEN 1 ELSE 0 END)::text
FROM dimlog_changes
GROUP BY {{ keys|cols }}
ORDER BY {{ key_order|join(", ") }}
{# A searched CASE, never `CASE x WHEN …`: with that form, this statement fails on the
   shards of a table distributed by a date ("operator does not exist: text = boolean",
   Citus 13.2), so every incremental load of such a dimension did. #}
-- statement: append_by_offsets
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT $1 + dimlog_u.dimlog_off + ROW_NUMBER() OVER dimlog_w - 1,
       CASE
           WHEN dimlog_c.dimlog_change_kind = 'version' THEN $2 + dimlog_u.dimlog_voff + SUM(CASE WHEN dimlog_c.dimlog_change_kind = 'version' THEN 1 ELSE 0 END) OVER dimlog_w - 1
           WHEN dimlog_c.dimlog_change_kind = 'correction' THEN dimlog_c.dimlog_p_sk
       END,
       {{ keys|cols("dimlog_c") }},
{% for a in attrs %}
       CASE WHEN dimlog_c.dimlog_change_kind = 'tombstone' THEN NULL ELSE dimlog_c.{{ a }} END,
{% endfor %}
       dimlog_c.valid_from,
       dimlog_c.dimlog_change_kind = 'tombstone',
       CASE WHEN dimlog_c.dimlog_change_kind = 'tombstone' THEN NULL ELSE dimlog_c.row_hash END,
       $3,
       $4
FROM dimlog_changes dimlog_c
JOIN unnest({% for k in keys %}${{ loop.index + 4 }}::text[], {% endfor %}${{ keys|length + 5 }}::bigint[], ${{ keys|length + 6 }}::bigint[])
     AS dimlog_u ({% for k in keys %}dimlog_k{{ loop.index }}, {% endfor %}dimlog_off, dimlog_voff)
  ON {% for k in keys %}dimlog_c.{{ k }}::text = dimlog_u.dimlog_k{{ loop.index }}{{ " AND " if not loop.last }}{% endfor %}

WINDOW dimlog_w AS (PARTITION BY {{ keys|cols("dimlog_c") }} ORDER BY dimlog_c.valid_from ROWS UNBOUNDED PRECEDING)
{# What the load appended, kept for its rebuild (`append` keeps its RETURNING rows): its
   rows of the log, by load id, from each shard's BRIN index. #}
-- statement: append_kept
INSERT INTO dimlog_appended
SELECT log_id, {{ sk }}, {{ keys|cols }}{% for a in attrs %}, {{ a }}{% endfor %}, valid_from, is_deleted, row_hash, load_id
FROM {{ log }}
WHERE load_id = $1
