{# Compare every staged row with its predecessor P: the effective version (latest log
   row per key and valid_from, Type 1 observations excluded) with the greatest
   valid_from <= t, or an earlier staged row of the same key. Keys are touched only
   through the staged key list. A row that changes only Type 1 columns, and is the key's
   newest observation, is recorded as a Type 1 row (no surrogate key, no version). #}
{# The staged keys' effective versions, read from the log once: classify compares with
   them, and the rebuild derives the touched keys' rows from them and the rows this load
   appends (`dimlog_appended`) instead of reading the log again. #}
{# The value of a Type 1 column at a version's instant: its newest row there, an
   observation included. #}
{% macro at_instant(c, v) %}(SELECT dimlog_i.{{ c }} FROM {{ log }} dimlog_i WHERE {{ keys|eqs("dimlog_i", v) }} AND dimlog_i.valid_from = {{ v }}.valid_from AND NOT dimlog_i.is_deleted ORDER BY dimlog_i.log_id DESC LIMIT 1){% endmacro %}
{# The values a version logged in a column: its latest log row's. #}
{% macro logged(c) %}(SELECT dimlog_v.{{ c }} FROM {{ log }} dimlog_v WHERE {{ keys|eqs("dimlog_v", "dimlog_d") }} AND dimlog_v.valid_from = dimlog_d.valid_from AND dimlog_v.{{ sk }} = dimlog_d.{{ sk }} ORDER BY dimlog_v.log_id DESC LIMIT 1){% endmacro %}
{# A CTE read more than once: computed once (Citus inlines it instead, see
   sql/citus/classify.sql). #}
{% macro reused() %}MATERIALIZED{% endmacro %}
{# The staged keys in the key index's order, so that the log is probed along its index
   rather than all over it (fewer cache misses: a third less time at 1M log rows). Citus
   probes each shard for its own keys, and an ORDER BY there would pull them to the
   coordinator: sql/citus/classify.sql leaves it out. #}
{% macro in_key_order() %} ORDER BY {{ keys|cols }}{% endmacro %}
{# The log's rows of the staged keys. A one-column key is looked up as one array in one
   index scan, which walks the index in key order (a quarter less time than a nested
   loop of 10k probes at 1M log rows, and no plan to flip to a hash join over the whole
   log); several columns are joined. Citus joins on every shard (sql/citus/classify.sql):
   an array would be gathered on the coordinator. #}
{% macro of_staged_keys() %}
{% if keys|length == 1 %}
WHERE dimlog_l.{{ keys[0] }} = ANY (ARRAY(SELECT {{ keys[0] }} FROM dimlog_stage))
  AND
{% else %}
JOIN (SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage{{ in_key_order() }}) dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
WHERE
{% endif %}
{% endmacro %}
{# Whether a staged row changes anything, compared with its predecessor P. #}
{% macro change_kind() %}
           CASE
               WHEN is_deleted THEN CASE WHEN dimlog_p_deleted THEN NULL ELSE 'tombstone' END
               WHEN dimlog_p_valid_from IS NULL OR dimlog_p_deleted THEN 'version'
               WHEN dimlog_p_hash = row_hash THEN NULL
               WHEN dimlog_p_valid_from = valid_from THEN 'correction'
               ELSE 'version'
           END AS dimlog_change_kind
{% endmacro %}
{# One staged row per key (`unique_key`) that equals its predecessor changes nothing,
   and is dropped before the history is read: most rows a window rereads (its lookback,
   stamped up to the last watermark, $1) are such rows, and two probes of the key index
   per row cost less than reading the key's whole history and classifying it (at 1M log
   rows, 3k rereads: 13 ms against 30). Rows stamped after the watermark are mostly
   changes, which would pay for the probes and then for their history too.
   The predecessor P is the key's newest log row at or before the row's instant. The row
   is dropped when P is live, a version (not a Type 1 observation: a late delete may lie
   between it and its version), with the same hash and the same Type 1 values, and no
   tombstone of the key follows the row. Then classify would find P as its predecessor
   and no change; without a later tombstone there is nothing to revive and the row is
   not before the key's return (see `restored`); and a later live row is a newer
   observation than the row, so it is no Type 1 change either. A P logged under an
   earlier Type 2 column set matches only with the row's own hash, and then `stale`
   would not carry it over either. #}
-- statement: drop_unchanged
DELETE FROM dimlog_stage dimlog_d
WHERE dimlog_d.ctid = ANY (ARRAY(
    SELECT dimlog_s.ctid
    FROM (SELECT ctid, {{ keys|cols }}, valid_from, row_hash{% for c in t1 %}, {{ c }}{% endfor %} FROM dimlog_stage WHERE NOT is_deleted AND valid_from <= $1::timestamptz{{ in_key_order() }}) dimlog_s
    CROSS JOIN LATERAL (
        SELECT dimlog_l.is_deleted, dimlog_l.{{ sk }}, dimlog_l.row_hash{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %}
        FROM {{ log }} dimlog_l
        WHERE {{ keys|eqs("dimlog_l", "dimlog_s") }} AND dimlog_l.valid_from <= dimlog_s.valid_from
        ORDER BY dimlog_l.valid_from DESC, dimlog_l.log_id DESC
        LIMIT 1
    ) dimlog_p
    WHERE NOT dimlog_p.is_deleted AND dimlog_p.{{ sk }} IS NOT NULL
      AND dimlog_p.row_hash = dimlog_s.row_hash
{% for c in t1 %}
      AND dimlog_s.{{ c }}{{ "::text" if c in text_compared }} IS NOT DISTINCT FROM dimlog_p.{{ c }}{{ "::text" if c in text_compared }}
{% endfor %}
      AND NOT EXISTS (SELECT 1 FROM {{ log }} dimlog_l
                      WHERE {{ keys|eqs("dimlog_l", "dimlog_s") }} AND dimlog_l.valid_from > dimlog_s.valid_from AND dimlog_l.is_deleted)
))
-- statement: history
CREATE TEMP TABLE dimlog_history ON COMMIT DROP AS
SELECT DISTINCT ON ({{ keys|cols("dimlog_l") }}, dimlog_l.valid_from)
       dimlog_l.log_id, dimlog_l.{{ sk }}, {{ keys|cols("dimlog_l") }}{% for a in attrs %}, dimlog_l.{{ a }}{% endfor %}, dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.row_hash, dimlog_l.load_id
FROM {{ log }} dimlog_l
{{ of_staged_keys() }} (dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL)
ORDER BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from, dimlog_l.log_id DESC
{# A delete stamped at the same instant as a live version of its key, read in a later
   load (issue 21): logged at that instant it would replace the version, and a surrogate
   key facts may hold would vanish. It moves to the version's valid_from + 1 µs, so the
   version keeps a 1 µs interval. Runs before everything else compares the staged rows. #}
-- statement: shift_deletes
UPDATE dimlog_stage dimlog_s
SET valid_from = {{ "dimlog_s.valid_from"|next_micro }}
FROM dimlog_history dimlog_h
WHERE {{ keys|eqs("dimlog_s", "dimlog_h") }} AND dimlog_h.valid_from = dimlog_s.valid_from
  AND dimlog_s.is_deleted AND NOT dimlog_h.is_deleted
{# A moved delete that lands on another live version (one logged, or one staged by this
   load, 1 µs later) would replace that one: there is no room for it, and it is dropped;
   its key and (moved) time are returned, for the run to report. #}
-- statement: drop_hidden_deletes
{# Formatted outside the DELETE: a distributed engine runs the DELETE on its shards,
   where RETURNING may only call IMMUTABLE functions (to_char is STABLE). #}
WITH dimlog_dropped AS (
DELETE FROM dimlog_stage dimlog_s
WHERE dimlog_s.is_deleted
  AND (EXISTS (SELECT 1 FROM dimlog_history dimlog_h
               WHERE {{ keys|eqs("dimlog_h", "dimlog_s") }} AND dimlog_h.valid_from = dimlog_s.valid_from AND NOT dimlog_h.is_deleted)
       OR EXISTS (SELECT 1 FROM dimlog_stage dimlog_o
                  WHERE {{ keys|eqs("dimlog_o", "dimlog_s") }} AND dimlog_o.valid_from = dimlog_s.valid_from AND NOT dimlog_o.is_deleted))
RETURNING {{ keys|cols("dimlog_s") }}, dimlog_s.valid_from
)
SELECT {% for k in key_names %}{{ k }}::text, {% endfor %}{{ "valid_from"|pgts }} FROM dimlog_dropped
{# Restored keys (spec 1.4, "Revival"; history = "latest", where a staged row is the key's
   state now). For each staged key with a tombstone in its history: its newest effective
   row, the newest tombstone, and the first row after that tombstone (the key's return)
   if it was logged after the tombstone: a version logged before a late tombstone (a
   delete whose stamp moved back behind it) is no return, and a reread of that delete is
   one P already holds, not the key's state after a return. The three statements below
   settle a staged live row stamped behind its key's tombstone once, against this
   summary, before classify compares anything. #}
-- statement: restored
CREATE TEMP TABLE dimlog_restored ON COMMIT DROP AS
WITH dimlog_ordered AS {{ reused() }} (
    SELECT dimlog_h.*,
           LAG(dimlog_h.is_deleted) OVER (PARTITION BY {{ keys|cols("dimlog_h") }} ORDER BY dimlog_h.valid_from) AS dimlog_after_tombstone,
           LAG(dimlog_h.log_id) OVER (PARTITION BY {{ keys|cols("dimlog_h") }} ORDER BY dimlog_h.valid_from) AS dimlog_before_log_id,
           ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_h") }} ORDER BY dimlog_h.valid_from DESC) AS dimlog_rn
    FROM dimlog_history dimlog_h
    {# Only keys with a tombstone can be restored: the window functions sort those alone
       (most loads have none). #}
    WHERE ({{ keys|cols("dimlog_h") }}) IN (SELECT {{ keys|cols }} FROM dimlog_history WHERE is_deleted)
),
dimlog_marks AS (
    SELECT {{ keys|cols }},
           MAX(CASE WHEN is_deleted THEN valid_from END) AS dimlog_tombstone_at,
           MAX(CASE WHEN NOT is_deleted AND dimlog_after_tombstone AND log_id > dimlog_before_log_id THEN valid_from END) AS dimlog_return_at
    FROM dimlog_ordered
    GROUP BY {{ keys|cols }}
    HAVING bool_or(is_deleted)
)
SELECT {{ keys|cols("dimlog_o") }}{% for c in t1 %}, dimlog_o.{{ c }}{% endfor %}, dimlog_o.valid_from AS dimlog_newest_at, dimlog_o.is_deleted AS dimlog_newest_deleted,
       dimlog_o.row_hash AS dimlog_newest_hash, dimlog_m.dimlog_tombstone_at, dimlog_m.dimlog_return_at
FROM dimlog_ordered dimlog_o
JOIN dimlog_marks dimlog_m ON {{ keys|eqs("dimlog_o", "dimlog_m") }}
WHERE dimlog_o.dimlog_rn = 1
{# Revival: the key's newest row is the tombstone, at or after the row's own time. The
   row opens a version at the upper bound, or just after the tombstone; the mirror of a
   hard delete's tombstone. #}
-- statement: revive
UPDATE dimlog_stage dimlog_s
SET valid_from = GREATEST($1::timestamptz, {{ "dimlog_r.dimlog_newest_at"|next_micro }})
FROM dimlog_restored dimlog_r
WHERE {{ keys|eqs("dimlog_s", "dimlog_r") }} AND dimlog_r.dimlog_newest_deleted
  AND NOT dimlog_s.is_deleted AND dimlog_s.valid_from <= dimlog_r.dimlog_newest_at
{# Rereads: a live row before the return of a key already back (revived or returned)
   that equals its newest version is the dimension's current row; a tombstone of a key
   whose newest row is a tombstone, stamped at or before it, is that delete again.
   Compared with their predecessors they would open late copies, correct old versions,
   or put a tombstone into the key's past. #}
-- statement: drop_rereads
DELETE FROM dimlog_stage dimlog_s
USING dimlog_restored dimlog_r
WHERE {{ keys|eqs("dimlog_s", "dimlog_r") }}
  AND ((NOT dimlog_r.dimlog_newest_deleted
        AND NOT dimlog_s.is_deleted AND dimlog_s.valid_from < dimlog_r.dimlog_return_at
        AND dimlog_s.row_hash = dimlog_r.dimlog_newest_hash
{% for c in t1 %}
        AND dimlog_s.{{ c }}{{ "::text" if c in text_compared }} IS NOT DISTINCT FROM dimlog_r.{{ c }}{{ "::text" if c in text_compared }}
{% endfor %}
       )
       OR (dimlog_r.dimlog_newest_deleted AND dimlog_s.is_deleted AND dimlog_s.valid_from <= dimlog_r.dimlog_newest_at))
{# A key already back whose row (changed, or deleted) is stamped before its return: the
   revival's own time is dimlog's (the upper bound), so the row is the key's state now,
   a version or tombstone after its newest row (at the upper bound), not a late one. #}
-- statement: restate
UPDATE dimlog_stage dimlog_s
SET valid_from = GREATEST($1::timestamptz, {{ "dimlog_r.dimlog_newest_at"|next_micro }})
FROM dimlog_restored dimlog_r
WHERE {{ keys|eqs("dimlog_s", "dimlog_r") }} AND NOT dimlog_r.dimlog_newest_deleted
  AND dimlog_s.valid_from < dimlog_r.dimlog_return_at
-- statement: classify
CREATE TEMP TABLE dimlog_changes ON COMMIT DROP AS
WITH
{% if t1 %}
{# (Only where it is read: Citus plans a statement with an unread CTE apart.) #}
dimlog_staged_keys AS (
    SELECT DISTINCT {{ keys|cols }} FROM dimlog_stage
),
dimlog_newest_observation AS (
    SELECT DISTINCT ON ({{ keys|cols("dimlog_l") }}) {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %}
    FROM {{ log }} dimlog_l
    JOIN dimlog_staged_keys dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
    WHERE NOT dimlog_l.is_deleted
    ORDER BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from DESC, dimlog_l.log_id DESC
),
{% endif %}
{% if unique_key %}
{# One staged row per key: P is the key's effective row with the greatest valid_from up
   to the row's own (one at the same instant included, as the window below orders a
   logged row first), found by one join: sorting the effective rows and the staged ones
   together through six window functions took twice as long (10k keys). A key with no
   such row (new, or staged before all its history) has none. #}
dimlog_paired AS (
    SELECT DISTINCT ON ({{ keys|cols("dimlog_s") }}) {{ keys|cols("dimlog_s") }}, dimlog_s.valid_from, dimlog_s.is_deleted, dimlog_s.row_hash{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %},
           dimlog_p.valid_from AS dimlog_p_valid_from, dimlog_p.{{ sk }} AS dimlog_p_sk, dimlog_p.is_deleted AS dimlog_p_deleted, dimlog_p.row_hash AS dimlog_p_hash
    FROM dimlog_stage dimlog_s
    LEFT JOIN dimlog_history dimlog_p ON {{ keys|eqs("dimlog_p", "dimlog_s") }} AND dimlog_p.valid_from <= dimlog_s.valid_from
    ORDER BY {{ keys|cols("dimlog_s") }}, dimlog_p.valid_from DESC NULLS LAST
),
dimlog_decided AS (
    SELECT dimlog_d.*, dimlog_n.dimlog_newest_logged, dimlog_d.valid_from AS dimlog_newest_staged,
{{ change_kind() }}
    FROM dimlog_paired dimlog_d
    LEFT JOIN (SELECT {{ keys|cols }}, MAX(valid_from) AS dimlog_newest_logged FROM dimlog_history GROUP BY {{ keys|cols }}) dimlog_n
           ON {{ keys|eqs("dimlog_n", "dimlog_d") }}
),
{% else %}
dimlog_effective AS {{ reused() }} (
    SELECT {{ keys|cols }}, valid_from, {{ sk }} AS dimlog_sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}
    FROM dimlog_history
),
dimlog_combined AS (
    SELECT {{ keys|cols }}, valid_from, dimlog_sk, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 0 AS dimlog_src
    FROM dimlog_effective
    UNION ALL
    SELECT {{ keys|cols }}, valid_from, NULL::bigint, is_deleted, row_hash{% for a in attrs %}, {{ a }}{% endfor %}, 1 AS dimlog_src
    FROM dimlog_stage dimlog_s
),
{# Staged rows of a key may follow each other: P is the row just before, logged or staged. #}
dimlog_sequenced AS (
    SELECT dimlog_c.*,
           LAG(valid_from) OVER dimlog_w AS dimlog_p_valid_from,
           LAG(dimlog_sk)         OVER dimlog_w AS dimlog_p_sk,
           LAG(is_deleted) OVER dimlog_w AS dimlog_p_deleted,
           LAG(row_hash)   OVER dimlog_w AS dimlog_p_hash,
           MAX(CASE WHEN dimlog_src = 0 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS dimlog_newest_logged,
           MAX(CASE WHEN dimlog_src = 1 THEN valid_from END) OVER (PARTITION BY {{ keys|cols }}) AS dimlog_newest_staged
    FROM dimlog_combined dimlog_c
    WINDOW dimlog_w AS (PARTITION BY {{ keys|cols }} ORDER BY valid_from, dimlog_src)
),
dimlog_decided AS (
    SELECT dimlog_s.*,
{{ change_kind() }}
    FROM dimlog_sequenced dimlog_s
    WHERE dimlog_src = 1
),
{% endif %}
dimlog_typed AS (
    SELECT dimlog_d.*,
           CASE
               WHEN dimlog_d.dimlog_change_kind IS NOT NULL THEN dimlog_d.dimlog_change_kind
{% if t1 %}
               WHEN NOT dimlog_d.is_deleted AND dimlog_d.valid_from = dimlog_d.dimlog_newest_staged
                    AND (dimlog_n.valid_from IS NULL OR dimlog_d.valid_from >= dimlog_n.valid_from)
                    AND ({% for c in t1 %}{% set t = "::text" if c in text_compared else "" %}dimlog_d.{{ c }}{{ t }} IS DISTINCT FROM dimlog_n.{{ c }}{{ t }}{{ " OR " if not loop.last }}{% endfor %})
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
-- statement: counts
SELECT count(*) FILTER (WHERE dimlog_change_kind = 'version')::text,
       count(*) FILTER (WHERE dimlog_change_kind = 'version' AND dimlog_is_late)::text,
       count(*) FILTER (WHERE dimlog_change_kind = 'correction')::text,
       count(*) FILTER (WHERE dimlog_change_kind = 'tombstone' AND NOT dimlog_closes_nothing)::text,
       count(*) FILTER (WHERE dimlog_change_kind = 'type1')::text,
       count(*)::text,
       count(*) FILTER (WHERE dimlog_closes_nothing)::text
FROM dimlog_changes
{# A first load into an empty log, one staged row per key: every row opens a version (a
   tombstone if it is deleted), so nothing needs comparing. #}
-- statement: first_counts
SELECT count(*) FILTER (WHERE NOT is_deleted)::text, '0', count(*)::text, count(*) FILTER (WHERE is_deleted)::text
FROM dimlog_stage
{# A config change carries a key's current version over to the new column set when the
   source agrees with it on every Type 2 column tracked before and after. On a change
   feed the source's state is its newest event read before the change ($1, the
   watermark); later events are versions as usual. Columns no longer tracked keep the
   version's logged values. A column added back carries the source's value over only
   when it equals the version's logged value or the key's last logged one, or the row is
   not later than the version: otherwise it changed while it was not tracked, and the
   row opens a version at its own time. A column that was Type 1 before
   (`readded_observed`) was logged by Type 1 observations too (no surrogate key): its
   last logged value may be one, the value every row of the key showed. #}
-- statement: rehash
CREATE TEMP TABLE dimlog_rehashed ON COMMIT DROP AS
SELECT {{ keys|cols("dimlog_s") }}, dimlog_d.{{ sk }} AS dimlog_sk, dimlog_d.valid_from{% for a in attrs %}, dimlog_s.{{ a }}{% endfor %}{% for c in carried %}, {{ logged(c) }} AS {{ c }}{% endfor %}, dimlog_s.row_hash
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted
{% if history_all %}
  AND dimlog_s.valid_from <= $1::timestamptz
{% endif %}
{% for c in retained %}
  AND dimlog_s.{{ c }}{{ "::text" if c in text_compared }} IS NOT DISTINCT FROM dimlog_d.{{ c }}{{ "::text" if c in text_compared }}
{% endfor %}
{% for c in readded %}
{% set t = "::text" if c in text_compared else "" %}
  AND (dimlog_s.valid_from <= dimlog_d.valid_from OR dimlog_s.{{ c }}{{ t }} IS NOT DISTINCT FROM {{ logged(c) }}{{ t }}
       OR dimlog_s.{{ c }}{{ t }} IS NOT DISTINCT FROM (SELECT dimlog_k.{{ c }}{{ t }} FROM {{ log }} dimlog_k
                               WHERE {{ keys|eqs("dimlog_k", "dimlog_d") }}{% if c not in readded_observed %} AND dimlog_k.{{ sk }} IS NOT NULL{% endif %} AND dimlog_k.{{ c }} IS NOT NULL
                               ORDER BY dimlog_k.valid_from DESC, dimlog_k.log_id DESC LIMIT 1))
{% endfor %}
{# A config change on a change feed: events read before it (stamped up to the watermark,
   $1) are history under the old column set. Only each key's newest such event stays, the
   key's state when the change was made; later events are read as usual. #}
-- statement: feed_read_before
{# A staged row is one per key and valid_from (history = "all"), so "not the newest" is
   "a later one of its key is staged up to $1" (no ctid: the same on a distributed engine). #}
DELETE FROM dimlog_stage dimlog_s
WHERE dimlog_s.valid_from <= $1::timestamptz
  AND EXISTS (SELECT 1 FROM dimlog_stage dimlog_o
              WHERE {{ keys|eqs("dimlog_o", "dimlog_s") }} AND dimlog_o.valid_from > dimlog_s.valid_from AND dimlog_o.valid_from <= $1::timestamptz)
-- statement: rehash_count
SELECT count(*)::text FROM dimlog_rehashed
{# A version logged before the last change of the Type 2 columns (its effective row's
   load id below $1, see `log::TRACKED_CHANGED`) holds a hash over the columns of its
   time, which no staged row (hashed over today's) equals: compared by hash, a row with
   the version's very values would open a version. So a staged live row whose
   predecessor is such a version (as `classify` finds it: the key's effective row with
   the greatest valid_from up to the row's, and no staged row of the key from that
   valid_from on before the row's), with another hash and the same value in every Type 2
   column (the same text, as the hash reads them), carries the version over to the new
   column set: its surrogate key, valid_from and logged values, with the staged row's
   hash (the source's, as every hash is). `stale_history` gives `classify` that hash and
   the load appends these rows. Type 1 values are those at the version's instant
   (`at_instant`), so the key's newest Type 1 values stay what they were. #}
-- statement: stale
CREATE TEMP TABLE dimlog_stale ON COMMIT DROP AS
SELECT dimlog_m.*, ROW_NUMBER() OVER (ORDER BY {{ key_order|join(", ") }}, dimlog_m.valid_from) AS dimlog_n
FROM (
    SELECT {{ keys|cols("dimlog_e") }}, dimlog_e.{{ sk }} AS dimlog_sk, dimlog_e.valid_from{% for c in cols %}, dimlog_e.{{ c }}{% endfor %}{% for c in t1 %}, {{ at_instant(c, "dimlog_e") }} AS {{ c }}{% endfor %}{% for c in carried %}, dimlog_v.{{ c }}{% endfor %}, dimlog_s.row_hash
    FROM (SELECT dimlog_h.*, LEAD(dimlog_h.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_h") }} ORDER BY dimlog_h.valid_from) AS dimlog_next_from
          FROM dimlog_history dimlog_h) dimlog_e
{% if carried %}
    JOIN {{ log }} dimlog_v ON dimlog_v.log_id = dimlog_e.log_id AND {{ keys|eqs("dimlog_v", "dimlog_e") }}
{% endif %}
    JOIN (SELECT dimlog_g.*, LAG(dimlog_g.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_g") }} ORDER BY dimlog_g.valid_from) AS dimlog_prev_from
          FROM dimlog_stage dimlog_g) dimlog_s ON {{ keys|eqs("dimlog_s", "dimlog_e") }}
         AND dimlog_s.valid_from >= dimlog_e.valid_from
         AND (dimlog_e.dimlog_next_from IS NULL OR dimlog_s.valid_from < dimlog_e.dimlog_next_from)
    WHERE NOT dimlog_e.is_deleted AND dimlog_e.load_id < $1
      AND NOT dimlog_s.is_deleted AND dimlog_s.row_hash IS DISTINCT FROM dimlog_e.row_hash
{% for c in cols %}
      AND dimlog_s.{{ c }}::text IS NOT DISTINCT FROM dimlog_e.{{ c }}::text
{% endfor %}
      AND (dimlog_s.dimlog_prev_from IS NULL OR dimlog_s.dimlog_prev_from < dimlog_e.valid_from)
) dimlog_m
-- statement: stale_index
{# Not needed on this engine: `classify` reads the carried-over versions' hashes from `dimlog_history` (`stale_history`). #}
-- statement: stale_count
SELECT count(*)::text FROM dimlog_stale
{# `classify` and the rebuild read the staged keys' versions from `dimlog_history`: the
   carried-over ones take their new hash, Type 1 values and this load's id ($1) there.
   (Their log ids stay those of the rows they supersede: no other row of this load has
   their key and valid_from, so the rebuild's order among them does not matter.) #}
-- statement: stale_history
UPDATE dimlog_history dimlog_h
SET row_hash = dimlog_x.row_hash, load_id = $1{% for c in t1 %}, {{ c }} = dimlog_x.{{ c }}{% endfor %}

FROM dimlog_stale dimlog_x
WHERE {{ keys|eqs("dimlog_h", "dimlog_x") }} AND dimlog_h.valid_from = dimlog_x.valid_from
{# On a change feed, events stamped up to the watermark of the last accepted column change
   ($1) are history under the column sets of their time, for every key the log holds: a
   later read (a lookback, a full refresh, a backfill) leaves them alone instead of
   comparing them with versions built under other columns (an unchanged event the log never
   held would otherwise open a version). A key the log does not hold at all is new, and its
   events are read as usual. #}
-- statement: feed_drop_history
DELETE FROM dimlog_stage dimlog_s
WHERE dimlog_s.valid_from <= $1::timestamptz
  AND EXISTS (SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_s") }})
