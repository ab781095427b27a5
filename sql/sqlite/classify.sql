{# Compare every staged row with its predecessor P: the effective version (latest log
   row per key and valid_from, Type 1 observations excluded) with the greatest
   valid_from <= t, or an earlier staged row of the same key. Keys are touched only
   through the staged key list. A row that changes only Type 1 columns, and is the key's
   newest observation, is recorded as a Type 1 row (no surrogate key, no version). #}
{# The log is read through the staged keys: `CROSS JOIN` keeps them the outer loop, so
   SQLite probes the log's key index per staged key instead of scanning the whole log in
   index order (which it prefers without statistics, to save a sort). #}
{# Fixed-width UTC text plus one microsecond. #}
{% macro plus_1us(e) %}(CASE WHEN substr({{ e }}, 21, 6) = '999999' THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ e }}, 1, 19), '+1 second') || '.000000Z' ELSE substr({{ e }}, 1, 20) || printf('%06d', CAST(substr({{ e }}, 21, 6) AS INTEGER) + 1) || 'Z' END){% endmacro %}
{# A delete stamped at the same instant as a live version of its key, read in a later
   load (issue 21): logged at that instant it would replace the version, and a surrogate
   key facts may hold would vanish. It moves to the version's valid_from + 1 µs, so the
   version keeps a 1 µs interval. Runs before everything else compares the staged rows. #}
{# A version this load carries over to a changed Type 2 column set (`stale`, below) is
   compared with the hash it is appended with. #}
{% macro logged_hash(l) %}{% if stale %}(COALESCE((SELECT dimlog_r.row_hash FROM dimlog_stale dimlog_r WHERE {{ keys|eqs("dimlog_r", l) }} AND dimlog_r.valid_from = {{ l }}.valid_from), {{ l }}.row_hash)){% else %}{{ l }}.row_hash{% endif %}{% endmacro %}
{# The value of a Type 1 column at a version's instant: its newest row there, an
   observation included. #}
{% macro at_instant(c, v) %}(SELECT dimlog_i.{{ c }} FROM {{ log }} dimlog_i WHERE {{ keys|eqs("dimlog_i", v) }} AND dimlog_i.valid_from = {{ v }}.valid_from AND NOT dimlog_i.is_deleted ORDER BY dimlog_i.log_id DESC LIMIT 1){% endmacro %}
{# The values a version logged in a column: its latest log row's. #}
{% macro logged(c) %}(SELECT dimlog_v.{{ c }} FROM {{ log }} dimlog_v WHERE {{ keys|eqs("dimlog_v", "dimlog_d") }} AND dimlog_v.valid_from = dimlog_d.valid_from AND dimlog_v.{{ sk }} = dimlog_d.{{ sk }} ORDER BY dimlog_v.log_id DESC LIMIT 1){% endmacro %}
-- statement: shift_deletes
UPDATE dimlog_stage AS dimlog_s
SET valid_from = {{ plus_1us("dimlog_s.valid_from") }}
WHERE dimlog_s.is_deleted AND (
    SELECT NOT dimlog_l.is_deleted FROM {{ log }} dimlog_l
    WHERE {{ keys|eqs("dimlog_l", "dimlog_s") }} AND dimlog_l.valid_from = dimlog_s.valid_from
      AND (dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL)
    ORDER BY dimlog_l.log_id DESC LIMIT 1)
{# A moved delete that lands on another live version (one logged, or one staged by this
   load, 1 µs later) would replace that one: there is no room for it, and it is dropped;
   its key and (moved) time are returned, for the run to report. The staged live rows are
   an IN list, built once: a correlated EXISTS scanned the unindexed stage once per
   delete (six minutes for 22k deletes among 234k staged rows). #}
-- statement: drop_hidden_deletes
DELETE FROM dimlog_stage AS dimlog_s
WHERE dimlog_s.is_deleted AND ((
    SELECT NOT dimlog_l.is_deleted FROM {{ log }} dimlog_l
    WHERE {{ keys|eqs("dimlog_l", "dimlog_s") }} AND dimlog_l.valid_from = dimlog_s.valid_from
      AND (dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL)
    ORDER BY dimlog_l.log_id DESC LIMIT 1)
    OR ({{ keys|cols("dimlog_s") }}, dimlog_s.valid_from) IN (
        SELECT {{ keys|cols("dimlog_o") }}, dimlog_o.valid_from FROM dimlog_stage dimlog_o WHERE NOT dimlog_o.is_deleted))
RETURNING {% for k in keys %}CAST({{ k }} AS TEXT), {% endfor %}valid_from
-- statement: classify
CREATE TEMP TABLE dimlog_changes AS
WITH dimlog_staged_keys AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
dimlog_effective AS (
    SELECT {{ keys|cols }}, valid_from, dimlog_sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}
    FROM (
        SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from, dimlog_l.{{ sk }} AS dimlog_sk, dimlog_l.is_deleted, {{ logged_hash("dimlog_l") }} AS row_hash{% for a in attrs %}, dimlog_l.{{ a }}{% endfor %},
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
        FROM dimlog_staged_keys dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
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
        FROM dimlog_staged_keys dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
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
       (dimlog_newest_logged IS NOT NULL AND valid_from < dimlog_newest_logged) AS dimlog_is_late,
       {# A delete with no version of its key before it closes nothing: counted apart. #}
       (dimlog_final_kind = 'tombstone' AND dimlog_p_valid_from IS NULL) AS dimlog_closes_nothing
FROM dimlog_typed
WHERE dimlog_final_kind IS NOT NULL
{% if unique_key %}
UNION ALL
{# One staged row per key: a key the log has never seen has no predecessor, so its row
   opens a version (a tombstone if it is deleted) without the window above. #}
SELECT {{ keys|cols("dimlog_s") }}, dimlog_s.valid_from, dimlog_s.row_hash{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %}, NULL,
       CASE WHEN dimlog_s.is_deleted THEN 'tombstone' ELSE 'version' END, 0, dimlog_s.is_deleted
FROM dimlog_stage dimlog_s
WHERE NOT EXISTS (SELECT 1 FROM dimlog_effective dimlog_e WHERE {{ keys|eqs("dimlog_e", "dimlog_s") }})
{% endif %}
-- statement: counts
SELECT sum(dimlog_change_kind = 'version'), sum(dimlog_change_kind = 'version' AND dimlog_is_late),
       sum(dimlog_change_kind = 'correction'), sum(dimlog_change_kind = 'tombstone' AND NOT dimlog_closes_nothing), sum(dimlog_change_kind = 'type1'), count(*),
       sum(dimlog_closes_nothing)
FROM dimlog_changes
{# A first load into an empty log, one staged row per key: every row opens a version (a
   tombstone if it is deleted), so nothing needs comparing. #}
-- statement: first_counts
SELECT count(*) - count(CASE WHEN is_deleted THEN 1 END), 0, count(*), count(CASE WHEN is_deleted THEN 1 END)
FROM dimlog_stage
{# A config change carries a key's current version over to the new column set when the
   source agrees with it on every Type 2 column tracked before and after. On a change
   feed the source's state is its newest event read before the change (?1, the
   watermark); later events are versions as usual. Columns no longer tracked keep the
   version's logged values. A column added back carries the source's value over only
   when it equals the version's logged value or the key's last logged one, or the row is
   not later than the version: otherwise it changed while it was not tracked, and the
   row opens a version at its own time. A column that was Type 1 before
   (`readded_observed`) was logged by Type 1 observations too (no surrogate key): its
   last logged value may be one, the value every row of the key showed. #}
-- statement: rehash
CREATE TEMP TABLE dimlog_rehashed AS
SELECT {{ keys|cols("dimlog_s") }}, dimlog_d.{{ sk }} AS dimlog_sk, dimlog_d.valid_from{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %}{% for c in carried %}, {{ logged(c) }} AS {{ c }}{% endfor %}, dimlog_s.row_hash
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted
{% if history_all %}
  AND dimlog_s.valid_from <= ?1
{% endif %}
{% for c in retained %}
  AND dimlog_s.{{ c }} IS dimlog_d.{{ c }}
{% endfor %}
{% for c in readded %}
  AND (dimlog_s.valid_from <= dimlog_d.valid_from OR dimlog_s.{{ c }} IS {{ logged(c) }}
       OR dimlog_s.{{ c }} IS (SELECT dimlog_k.{{ c }} FROM {{ log }} dimlog_k
                               WHERE {{ keys|eqs("dimlog_k", "dimlog_d") }}{% if c not in readded_observed %} AND dimlog_k.{{ sk }} IS NOT NULL{% endif %} AND dimlog_k.{{ c }} IS NOT NULL
                               ORDER BY dimlog_k.valid_from DESC, dimlog_k.log_id DESC LIMIT 1))
{% endfor %}
{# A config change on a change feed: events read before it (stamped up to the watermark,
   ?1) are history under the old column set. Only each key's newest such event stays, the
   key's state when the change was made; later events are read as usual. #}
-- statement: feed_read_before
DELETE FROM dimlog_stage WHERE rowid IN (
    SELECT rowid FROM (
        SELECT rowid, ROW_NUMBER() OVER (PARTITION BY {{ keys|cols }} ORDER BY valid_from DESC) AS dimlog_rn
        FROM dimlog_stage WHERE valid_from <= ?1
    ) WHERE dimlog_rn > 1
)
-- statement: rehash_count
SELECT count(*) FROM dimlog_rehashed
{# A version logged before the last change of the Type 2 columns (its effective row's
   load id below ?1, see `log::TRACKED_CHANGED`) holds a hash over the columns of its
   time, which no staged row (hashed over today's) equals: compared by hash, a row with
   the version's very values would open a version. So a staged live row whose
   predecessor is such a version (as `classify` finds it: the key's effective row with
   the greatest valid_from up to the row's, and no staged row of the key from that
   valid_from on before the row's), with another hash and the same value in every Type 2
   column (same storage class and value, as the hash reads them), carries the version
   over to the new column set: its surrogate key, valid_from and logged values, with the
   staged row's hash (the source's, as every hash is). `classify` compares with that hash
   (`logged_hash`) and the load appends these rows. Type 1 values are those at the
   version's instant (`at_instant`), so the key's newest Type 1 values stay what they
   were. #}
-- statement: stale
CREATE TEMP TABLE dimlog_stale AS
WITH dimlog_staged_keys AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
dimlog_effective AS (
    SELECT dimlog_x.*, LEAD(dimlog_x.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_x") }} ORDER BY dimlog_x.valid_from) AS dimlog_next_from
    FROM (
        SELECT {{ keys|cols("dimlog_l") }}, dimlog_l.log_id AS dimlog_log_id, dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.row_hash, dimlog_l.load_id,
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
        FROM dimlog_staged_keys dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
        WHERE dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL
    ) dimlog_x
    WHERE dimlog_x.dimlog_rn = 1
)
SELECT dimlog_m.*, ROW_NUMBER() OVER (ORDER BY {{ keys|cols("dimlog_m") }}, dimlog_m.valid_from) AS dimlog_n
FROM (
    SELECT {{ keys|cols("dimlog_v") }}, dimlog_v.{{ sk }} AS dimlog_sk, dimlog_v.valid_from{% for c in cols %}, dimlog_v.{{ c }}{% endfor %}{% for c in t1 %}, {{ at_instant(c, "dimlog_v") }} AS {{ c }}{% endfor %}{% for c in carried %}, dimlog_v.{{ c }}{% endfor %}, dimlog_s.row_hash
    FROM dimlog_effective dimlog_e
    JOIN {{ log }} dimlog_v ON dimlog_v.log_id = dimlog_e.dimlog_log_id
    JOIN (SELECT dimlog_g.*, LAG(dimlog_g.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_g") }} ORDER BY dimlog_g.valid_from) AS dimlog_prev_from
          FROM dimlog_stage dimlog_g) dimlog_s ON {{ keys|eqs("dimlog_s", "dimlog_e") }}
         AND dimlog_s.valid_from >= dimlog_e.valid_from
         AND (dimlog_e.dimlog_next_from IS NULL OR dimlog_s.valid_from < dimlog_e.dimlog_next_from)
    WHERE NOT dimlog_e.is_deleted AND dimlog_e.load_id < ?1
      AND NOT dimlog_s.is_deleted AND dimlog_s.row_hash IS NOT dimlog_e.row_hash
{% for c in cols %}
      AND dimlog_s.{{ c }} IS dimlog_v.{{ c }} AND typeof(dimlog_s.{{ c }}) = typeof(dimlog_v.{{ c }})
{% endfor %}
      AND (dimlog_s.dimlog_prev_from IS NULL OR dimlog_s.dimlog_prev_from < dimlog_e.valid_from)
) dimlog_m
{# `classify` looks each effective row up in it. #}
-- statement: stale_index
CREATE INDEX temp.dimlog_stale_key ON dimlog_stale ({{ keys|cols }}, valid_from)
-- statement: stale_count
SELECT count(*) FROM dimlog_stale
-- statement: stale_history
{# Not needed on this engine: `classify` reads the log, and looks the carried-over versions' hashes up in `dimlog_stale`; the rebuild reads the log after the append. #}
{# Restored keys (spec 1.4, "Revival"; history = "latest", where a staged row is the key's
   state now). For each staged key with a tombstone in its history: its newest effective
   row, the newest tombstone, and the first row after that tombstone (the key's return)
   if it was logged after the tombstone: a version logged before a late tombstone (a
   delete whose stamp moved back behind it) is no return, and a reread of that delete is
   one P already holds, not the key's state after a return. The three statements below
   settle a staged live row stamped behind its key's tombstone once, against this
   summary, before classify compares anything. #}
-- statement: restored
CREATE TEMP TABLE dimlog_restored AS
WITH dimlog_staged_keys AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
dimlog_effective AS (
    SELECT * FROM (
        SELECT {{ keys|cols("dimlog_l") }}{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %}, dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.row_hash, dimlog_l.log_id,
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
        FROM dimlog_staged_keys dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
        WHERE dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL
    ) dimlog_x
    WHERE dimlog_x.dimlog_rn = 1
),
dimlog_ordered AS (
    SELECT dimlog_e.*,
           LAG(dimlog_e.is_deleted) OVER (PARTITION BY {{ keys|cols("dimlog_e") }} ORDER BY dimlog_e.valid_from) AS dimlog_after_tombstone,
           LAG(dimlog_e.log_id) OVER (PARTITION BY {{ keys|cols("dimlog_e") }} ORDER BY dimlog_e.valid_from) AS dimlog_before_log_id,
           ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_e") }} ORDER BY dimlog_e.valid_from DESC) AS dimlog_newest_rn
    FROM dimlog_effective dimlog_e
),
dimlog_marks AS (
    SELECT {{ keys|cols }},
           MAX(CASE WHEN is_deleted THEN valid_from END) AS dimlog_tombstone_at,
           MAX(CASE WHEN NOT is_deleted AND dimlog_after_tombstone AND log_id > dimlog_before_log_id THEN valid_from END) AS dimlog_return_at
    FROM dimlog_ordered
    GROUP BY {{ keys|cols }}
    HAVING MAX(CASE WHEN is_deleted THEN valid_from END) IS NOT NULL
)
SELECT {{ keys|cols("dimlog_o") }}{% for c in t1 %}, dimlog_o.{{ c }}{% endfor %}, dimlog_o.valid_from AS dimlog_newest_at, dimlog_o.is_deleted AS dimlog_newest_deleted,
       dimlog_o.row_hash AS dimlog_newest_hash, dimlog_m.dimlog_tombstone_at, dimlog_m.dimlog_return_at
FROM dimlog_ordered dimlog_o
JOIN dimlog_marks dimlog_m ON {{ keys|eqs("dimlog_o", "dimlog_m") }}
WHERE dimlog_o.dimlog_newest_rn = 1;
CREATE INDEX temp.dimlog_restored_key ON dimlog_restored ({{ keys|cols }})
{# Revival: the key's newest row is the tombstone, at or after the row's own time. The
   row opens a version at the upper bound, or just after the tombstone; the mirror of a
   hard delete's tombstone. #}
-- statement: revive
UPDATE dimlog_stage AS dimlog_s
SET valid_from = CASE WHEN dimlog_r.dimlog_newest_at < ?1 THEN ?1 ELSE {{ plus_1us("dimlog_r.dimlog_newest_at") }} END
FROM dimlog_restored AS dimlog_r
WHERE {{ keys|eqs("dimlog_s", "dimlog_r") }} AND dimlog_r.dimlog_newest_deleted
  AND NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= dimlog_r.dimlog_newest_at
{# Rereads: a live row before the return of a key already back (revived or returned)
   that equals its newest version is the dimension's current row; a tombstone of a key
   whose newest row is a tombstone, stamped at or before it, is that delete again.
   Compared with their predecessors they would open late copies, correct old versions,
   or put a tombstone into the key's past. #}
-- statement: drop_rereads
DELETE FROM dimlog_stage AS dimlog_s
WHERE EXISTS (
    SELECT 1 FROM dimlog_restored dimlog_r
    WHERE {{ keys|eqs("dimlog_r", "dimlog_s") }}
      AND ((NOT dimlog_r.dimlog_newest_deleted
            AND NOT dimlog_s.is_deleted AND dimlog_s.valid_from < dimlog_r.dimlog_return_at
            AND dimlog_s.row_hash = dimlog_r.dimlog_newest_hash
{% for c in t1 %}
            AND dimlog_s.{{ c }} IS dimlog_r.{{ c }}
{% endfor %}
           )
           OR (dimlog_r.dimlog_newest_deleted AND dimlog_s.is_deleted AND dimlog_s.valid_from <= dimlog_r.dimlog_newest_at))
)
{# A key already back whose row (changed, or deleted) is stamped before its return: the
   revival's own time is dimlog's (the upper bound), so the row is the key's state now,
   a version or tombstone after its newest row (at the upper bound), not a late one. #}
-- statement: restate
UPDATE dimlog_stage AS dimlog_s
SET valid_from = CASE WHEN dimlog_r.dimlog_newest_at < ?1 THEN ?1 ELSE {{ plus_1us("dimlog_r.dimlog_newest_at") }} END
FROM dimlog_restored AS dimlog_r
WHERE {{ keys|eqs("dimlog_s", "dimlog_r") }} AND NOT dimlog_r.dimlog_newest_deleted
  AND dimlog_s.valid_from < dimlog_r.dimlog_return_at
{# On a change feed, events stamped up to the watermark of the last accepted column change
   (?1) are history under the column sets of their time, for every key the log holds: a
   later read (a lookback, a full refresh, a backfill) leaves them alone instead of
   comparing them with versions built under other columns (an unchanged event the log never
   held would otherwise open a version). A key the log does not hold at all is new, and its
   events are read as usual. #}
-- statement: feed_drop_history
DELETE FROM dimlog_stage
WHERE dimlog_stage.valid_from <= ?1
  AND EXISTS (SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_stage") }})
{# Not on this engine: SQLite's classify reads the staged keys' rows through the key
   index within its one statement, with no history table to spare (a no-change run at
   1M rows takes 0.03 s). #}
-- statement: drop_unchanged
-- statement: history
{# Not needed on this engine: the rebuild reads the staged keys' history from the log itself. #}
