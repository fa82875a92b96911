#!/bin/bash
# Where does deleted content survive in PostgreSQL? Run as root against the throwaway server of
# .ci/postgres (it reads the server's files):
#   source .ci/postgres && memscope_pg_dir=$memscope_pg_dir docs/studies/postgres-deletion/study.sh
# Prints, per table layout and step, whether a canary is found in the heap, TOAST and index
# files and in pg_wal (README, "Running on PostgreSQL": what deletion means there).
set -u
export PATH="$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin):$PATH"
HERE=$(cd "$(dirname "$0")" && pwd)
URL=${MEMSCOPE_TEST_POSTGRES:?source .ci/postgres first}
SOCK=${memscope_pg_dir:?pass memscope_pg_dir from .ci/postgres}; PD=$SOCK/data; LOG=$SOCK/server.log
PORT=$(echo "$URL" | sed -E 's#.*:([0-9]+)/.*#\1#')
DB=pgstudy_$$
SU()  { runuser -u postgres -- psql -h "$SOCK" -p "$PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }
OWN() { psql "$(echo "$URL" | sed -E "s#/[^/]*\$#/$DB#")" -X -q -At "$@"; }   # non-superuser table owner over TCP
CKPT() { SU -d "$DB" -c "CHECKPOINT" ; }
R=$(head -c6 /dev/urandom | od -An -tx1 | tr -d ' \n')
C() { echo "CANARY-$1-短-🦜-$2-$R"; }          # column-kind, table
SU -c "CREATE DATABASE $DB OWNER memscope_test" || exit 1
trap 'SU -c "DROP DATABASE IF EXISTS $DB" >/dev/null' EXIT
big() { head -c 3000 /dev/urandom | base64 -w0; }   # incompressible filler, so TOAST holds the bytes literally
fill() { for i in $(seq $2 $3); do echo "INSERT INTO $1(subject,predicate,scope,content) VALUES ('fill$i','p','s','filler content $i');"; done; }
canrow() { echo "INSERT INTO $1(subject,predicate,scope,content,big) VALUES ('$(C IDX $1)','p','s','$(C INL $1)','$(big)$(C TST $1)$(big)');"; }
# layouts: mid = 20 fillers, canary, 20 fillers | last = 20 fillers, canary | lastbig = 20 fillers, canary, 1 live TOASTed row
TABLES="mid_del mid_upd last_del last_upd lastbig_del lastbig_upd"
for T in $TABLES; do
  { echo "CREATE TABLE $T (id serial primary key, subject text, predicate text, scope text, content text, big text);"
    echo "CREATE INDEX ${T}_spk ON $T (subject, predicate, scope);"
    fill $T 1 20; canrow $T
    case $T in mid_*) fill $T 21 40;; lastbig_*) echo "INSERT INTO $T(subject,predicate,scope,content,big) VALUES ('livebig','p','s','x','$(big)$(big)');";; esac
  } | OWN
done
rels() { H=$(OWN -c "select pg_relation_filepath('$1')")
         TT=$(OWN -c "select pg_relation_filepath(reltoastrelid) from pg_class where oid='$1'::regclass")
         I=$(OWN -c "select pg_relation_filepath('${1}_spk')"); }
cnt() { local n=0; for f in "$PD/$1" "$PD/$1".[0-9]*; do [ -f "$f" ] && n=$((n+$(grep -a -o "$2" "$f" | wc -l))); done; echo $n; }
walcnt() { local n=0; for f in "$PD"/pg_wal/0*; do grep -q -a "$1" "$f" && n=$((n+1)); done; echo $n; }
printf '%-30s %-11s | %-5s %-5s %-5s | %-5s %-5s\n' step table heapI heapN toast idxI WALsg
report() { local T=$2; rels $T
  local w=-; [ "$T" = mid_del ] && w=$(walcnt "$(C INL $T)")
  printf '%-30s %-11s | %-5s %-5s %-5s | %-5s %-5s\n' "$1" $T \
   $(cnt $H "$(C IDX $T)") $(cnt $H "$(C INL $T)") $(cnt $TT "$(C TST $T)") $(cnt $I "$(C IDX $T)") $w; }
all() { CKPT; for T in $TABLES; do report "$1" $T; done; echo; }
all "1 INSERT+ckpt"
for T in $TABLES; do case $T in
  *_del) OWN -c "DELETE FROM $T WHERE subject LIKE 'CANARY%'";;
  *_upd) OWN -c "UPDATE $T SET subject=NULL, content=NULL, big=NULL WHERE subject LIKE 'CANARY%'";; esac; done
all "2 DELETE/UPD-NULL+commit+ckpt"
for T in $TABLES; do OWN -c "SELECT count(*) FROM $T" >/dev/null; done
all "2b +SELECT(prune?)+ckpt"
for T in $TABLES; do OWN -c "VACUUM $T"; done
all "3 VACUUM+ckpt"
for T in $TABLES; do OWN -c "VACUUM (INDEX_CLEANUP ON) $T"; done
all "3b VACUUM(INDEX_CLEANUP ON)+ckpt"
for T in $TABLES; do fill $T 101 104; echo "INSERT INTO $T(subject,predicate,scope,content,big) VALUES ('newbig','p','s','x','$(big)');"; done | OWN
all "3c +5 new INSERTs+ckpt"
for T in $TABLES; do fill $T 200 260; done | OWN
all "3d +60 more INSERTs+ckpt"

echo "--- large table (~150 heap pages): does plain VACUUM skip index cleanup (PG14+ bypass when <2% pages have dead items)?"
for T in large_plain large_icon; do
  OWN -c "CREATE TABLE $T (id serial primary key, subject text, predicate text, scope text, content text, big text)" \
      -c "CREATE INDEX ${T}_spk ON $T (subject, predicate, scope)" \
      -c "INSERT INTO $T(subject,predicate,scope,content) SELECT 'fill'||g,'p','s',repeat('x',100) FROM generate_series(1,8000) g"
  canrow $T | OWN
  OWN -c "INSERT INTO $T(subject,predicate,scope,content) SELECT 'fillb'||g,'p','s',repeat('x',100) FROM generate_series(1,2000) g"
  OWN -c "DELETE FROM $T WHERE subject LIKE 'CANARY%'"
done
CKPT; report "L2 DELETE+ckpt" large_plain; report "L2 DELETE+ckpt" large_icon
OWN -c "VACUUM (VERBOSE) large_plain" 2>&1 | grep -iE "index scan|bypass|pages:" | sed 's/^/   /'
OWN -c "VACUUM (INDEX_CLEANUP ON, VERBOSE) large_icon" 2>&1 | grep -iE "index scan|bypass|pages:" | sed 's/^/   /'
CKPT; report "L3 VACUUM+ckpt" large_plain; report "L3 VACUUM(INDEX_CLEANUP ON)+ckpt" large_icon
echo "   relpages: $(OWN -c "select string_agg(relname||'='||relpages,' ') from pg_class where relname in ('large_plain','large_icon')")"

rels mid_del; OLDH=$H; OLDT=$TT; OLDI=$I
for T in $TABLES; do OWN -c "VACUUM FULL $T"; done
ex() { [ -e "$PD/$1" ] && echo "yes(size=$(stat -c%s "$PD/$1"))" || echo no; }
echo "VACUUM FULL, before ckpt: old heap file $(ex $OLDH) old toast $(ex $OLDT) old index $(ex $OLDI)"
CKPT
echo "VACUUM FULL, after ckpt : old heap file $(ex $OLDH) old toast $(ex $OLDT) old index $(ex $OLDI)"
all "4 VACUUM FULL+ckpt"
echo "--- WAL retention (mid_del canary): pg_switch_wal()+CHECKPOINT repeated"
SU -Atc "select 'settings: '||string_agg(name||'='||setting,' ') from pg_settings where name in ('wal_keep_size','min_wal_size','max_wal_size','archive_mode','wal_recycle','wal_init_zero','fsync')"
for k in 1 2 3 4 5 6; do
  SU -d $DB -c "SELECT pg_switch_wal()" >/dev/null; OWN -c "INSERT INTO mid_upd(subject) VALUES ('w')"; CKPT
  cur=$(SU -d $DB -c "SELECT pg_walfile_name(pg_current_wal_lsn())")
  hits=$(for f in "$PD"/pg_wal/0*; do grep -q -a "$(C INL mid_del)" "$f" && basename $f; done | tr '\n' ' ')
  echo "switch+ckpt #$k: current=$cur segfiles=[$(ls $PD/pg_wal | grep '^0' | tr '\n' ' ')] canary_in=[$hits]"
done
echo; echo "--- privileges as non-superuser owner memscope_test"
for q in "VACUUM mid_del" "VACUUM FULL mid_del" "CHECKPOINT" "SELECT pg_switch_wal()" "SET log_statement='all'"; do
  out=$(OWN -c "$q" 2>&1 >/dev/null); echo "$q => ${out:-OK}"; done
echo; echo "--- query text exposure (literal vs bind parameter)"
OWN -c "CREATE TABLE q (subject text UNIQUE)"
lit=$(C LIT q); bnd=$(C BND q); bnd2=$(C BND2 q)
n0=$(grep -a -c CANARY "$LOG")
# defaults (log_statement=none, log_min_duration_statement=-1)
OWN -c "INSERT INTO q VALUES ('${lit}-default')"
python3 $HERE/bindq.py $SOCK $PORT memscope_test $DB 'INSERT INTO q VALUES ($1)' "${bnd}-default"
python3 $HERE/bindq.py $SOCK $PORT memscope_test $DB 'INSERT INTO q VALUES ($1)' "${bnd}-default" >/dev/null  # unique violation
sleep 0.5
echo "defaults: log lines w/ literal=$(grep -a -c "${lit}-default" $LOG) w/ bind param=$(grep -a -c "${bnd}-default" $LOG)"
grep -a "${bnd}-default" $LOG | sed 's/^/   LOG: /' | cut -c1-200
SU -c "ALTER DATABASE $DB SET log_statement='all'"
OWN -c "INSERT INTO q VALUES ('${lit}-all')"
python3 $HERE/bindq.py $SOCK $PORT memscope_test $DB 'INSERT INTO q VALUES ($1)' "${bnd}-all"
sleep 0.5
echo "log_statement=all: literal=$(grep -a -c "${lit}-all" $LOG) bind=$(grep -a -c "${bnd}-all" $LOG)"
grep -a "${bnd}-all" $LOG | sed 's/^/   LOG: /' | cut -c1-200
SU -c "ALTER DATABASE $DB RESET log_statement"
# pg_stat_activity while running
python3 $HERE/bindq.py $SOCK $PORT memscope_test $DB 'SELECT pg_sleep(2), $1::text' "$bnd2" & bp=$!
OWN -c "SELECT pg_sleep(2), '$(C LIT2 q)'" >/dev/null & lp=$!
sleep 1
SU -d $DB -c "SELECT 'pg_stat_activity: '||query FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%' AND pid<>pg_backend_pid()"
wait $bp $lp
SU -Atc "select 'pg_stat_statements available/loaded: '||(select count(*) from pg_available_extensions where name='pg_stat_statements')||'/'||current_setting('shared_preload_libraries')"
