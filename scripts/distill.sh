#!/usr/bin/env bash
# Interpolated sequence-level knowledge distillation (Kim & Rush 2016; Marian's WNMT 2018 system),
# end to end and resumable step by step:
#   1. teacher(s): train with --teacher-config (resumes), or take trained --teacher MODEL.tern files
#   2. n-best:     the teacher translates the training source into an n-best list (--beam N);
#                  several teachers decode it as one ensemble (tern-translate --model A --model B,
#                  the mean of their log-probabilities), or with --pool each into its own list
#   3. select:     per line, the hypothesis with the best sentence BLEU against the reference
#                  (over all lists) becomes the student's target (tern-distill-select)
#   4. student:    trains --student-config on (source, distilled target) with the teacher's vocabulary
#   5. export:     the student as WORK/student.WEIGHTS.tern (tern-export --weights WEIGHTS)
# Each step writes its output atomically and is skipped when the output exists, so rerunning the
# same command continues where it stopped. Extra --set overrides apply to teacher and student.
#
#   scripts/distill.sh --work DIR --student-config configs/X.pbtxt
#       (--teacher-config configs/Y.pbtxt [--teacher-after 30m] | --teacher A.tern [--teacher B.tern])
#       [--student-after 30m] [--beam 8] [--pool] [--weights int16] [--set "a.b=v;..."]
#       [--bin build/bin]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work="" student_config="" teacher_config="" teacher_after="" student_after="" sets=""
beam=8 weights=int16 bin="$root/build/bin" pool=0
teachers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --student-config) student_config="$2"; shift 2 ;;
    --teacher-config) teacher_config="$2"; shift 2 ;;
    --teacher) teachers+=("$2"); shift 2 ;;
    --teacher-after) teacher_after="$2"; shift 2 ;;
    --student-after) student_after="$2"; shift 2 ;;
    --beam) beam="$2"; shift 2 ;;
    --pool) pool=1; shift ;;
    --weights) weights="$2"; shift 2 ;;
    --set) sets="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "distill.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "distill.sh: $*" >&2; exit 1; }
[ -n "$work" ] || die "--work DIR is required"
[ -n "$student_config" ] || die "--student-config FILE is required"
[ -f "$student_config" ] || die "$student_config: no such student config"
if [ ${#teachers[@]} -eq 0 ] && [ -z "$teacher_config" ]; then
  die "give --teacher-config FILE (train a teacher) or --teacher MODEL.tern (one per teacher)"
fi
for t in "${teachers[@]}"; do [ -f "$t" ] || die "$t: no such teacher model"; done
mkdir -p "$work/data"
step() { printf '== distill: %s\n' "$*" >&2; }
# The value of a config field (after --set overrides) as tern-train would see it.
field() {  # field CONFIG DOTTED.NAME
  local v
  v=$(printf '%s' "$sets" | tr ';' '\n' | sed -n "s/^$2=//p" | tail -n 1)
  [ -n "$v" ] && { printf '%s' "$v"; return; }
  python3 - "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section, name = sys.argv[2].split(".")
m = re.search(r"\b%s\s*\{(.*?)\}" % section, text, re.S)
v = re.search(r"\b%s:\s*\"?([^\"\n#]*)\"?" % name, m.group(1)) if m else None
print(v.group(1).strip() if v else "", end="")
PY
}
train_src=$(field "$student_config" data.train_src)
train_tgt=$(field "$student_config" data.train_tgt)
[ -f "$train_src" ] || die "$train_src: the student's data.train_src does not exist"
[ -f "$train_tgt" ] || die "$train_tgt: the student's data.train_tgt does not exist"
mpi=(mpirun --bind-to none -np 1)
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# 1. teacher
vocab=""
if [ ${#teachers[@]} -eq 0 ]; then
  step "1/5 training the teacher ($teacher_config) in $work/teacher"
  args=(--config "$teacher_config" --model-dir "$work/teacher")
  [ -n "$teacher_after" ] && args+=(--after "$teacher_after")
  [ -n "$sets" ] && args+=(--set "$sets")
  "${mpi[@]}" "$bin/tern-train" "${args[@]}"
  teachers=("$work/teacher/model.tern")
  vocab="$work/teacher/vocab.spm"
else
  step "1/5 teachers given: ${teachers[*]}"
  # The student reads the teacher's vocabulary; tern-npz/tern-export embed it in the model, and
  # the trainer keeps a copy next to the model.
  d=$(dirname "${teachers[0]}")
  [ -f "$d/vocab.spm" ] && vocab="$d/vocab.spm"
fi

# 2. n-best lists: one per teacher with --pool (or a single teacher), else one from the ensemble
nbests=()
nbest() {  # nbest OUT MODEL...
  local out=$1 models=()
  shift
  for m in "$@"; do models+=(--model "$m"); done
  if [ ! -s "$out" ]; then
    step "2/5 $* translate(s) $train_src (beam $beam, n-best) -> $out"
    "$bin/tern-translate" "${models[@]}" --beam "$beam" --n-best < "$train_src" > "$out.tmp"
    mv "$out.tmp" "$out"
  else
    step "2/5 $out exists"
  fi
  nbests+=(--nbest "$out")
}
if [ ${#teachers[@]} -gt 1 ] && [ "$pool" = 0 ]; then
  nbest "$work/data/teacher-ensemble.nbest" "${teachers[@]}"
else
  for i in "${!teachers[@]}"; do nbest "$work/data/teacher-$i.nbest" "${teachers[$i]}"; done
fi

# 3. selection by sentence BLEU
distilled="$work/data/train.distilled"
if [ ! -s "$distilled" ]; then
  step "3/5 choosing the best-BLEU hypotheses -> $distilled"
  "$bin/tern-distill-select" --ref "$train_tgt" "${nbests[@]}" --out "$distilled"
else
  step "3/5 $distilled exists"
fi

# 4. student
step "4/5 training the student ($student_config) in $work/student"
student_sets="data.train_tgt=$distilled"
[ -n "$vocab" ] && student_sets+=";data.vocab=$vocab"
[ -n "$sets" ] && student_sets="$sets;$student_sets"
args=(--config "$student_config" --model-dir "$work/student" --set "$student_sets")
[ -n "$student_after" ] && args+=(--after "$student_after")
"${mpi[@]}" "$bin/tern-train" "${args[@]}"

# 5. export
out="$work/student.$weights.tern"
step "5/5 exporting $out"
"$bin/tern-export" --checkpoint "$work/student" --out "$out" --weights "$weights"
step "done: $out"
