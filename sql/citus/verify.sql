{# `dimlog verify` on Citus: PostgreSQL's checks (sql/postgres/verify.sql), with a row
   paired to another by surrogate key AND key. A surrogate key belongs to one key, and
   Citus refuses to change a distribution column, so the pairing is the same; joined on
   the distribution column, the checks run on the shards. #}
{% macro sk_pair(a, b) %}{{ a }}.{{ sk }} = {{ b }}.{{ sk }} AND {{ keys|eqs(a, b) }}{% endmacro %}
