#!/usr/bin/env python3
"""Prints, as one bash script, the command blocks the docs tell a newcomer to run, rewritten for
a test's budget: README.md's "by hand" block, then docs/serving.md's first example.

  documented_commands.py ROOT

The commands stay as written but for these changes. A page whose marker line or ```sh block is
gone, or a curl not to 127.0.0.1:8080, fails here rather than being skipped; any other command is
run unchanged:
- tern-train gets the test's tiny model and corpus ($TINY, from tests/e2e/common.sh) in its --set
  and a budget of a few updates (--after);
- tern-serve runs in the background on a port of its choosing, the script waiting until it is
  ready (wait_ready sets $PORT), and curl asks that port instead of 8080; stop_server ends it;
- every curl must answer with translations.
"""
import re
import sys

BUDGET = '4u'


def block_after(path, marker):
    """The first ```sh block after the line that starts with `marker`, as logical commands."""
    lines = open(path, encoding='utf-8').read().split('\n')
    start = next((i for i, l in enumerate(lines) if l.startswith(marker)), None)
    if start is None:
        sys.exit('documented_commands: no line starting with %r in %s' % (marker, path))
    opened = next((i for i in range(start, len(lines)) if lines[i].strip() == '```sh'), None)
    if opened is None:
        sys.exit('documented_commands: no ```sh block after %r in %s' % (marker, path))
    commands, current = [], ''
    for line in lines[opened + 1:]:
        if line.strip() == '```':
            break
        code = line.split('  #')[0].rstrip() if not line.startswith('#') else ''
        if line.lstrip().startswith('#') or not code:
            continue
        current += code
        if current.endswith('\\'):
            current = current[:-1].rstrip() + ' '
        else:
            commands.append(current.strip())
            current = ''
    if not commands:
        sys.exit('documented_commands: the block after %r in %s is empty' % (marker, path))
    return commands


def rewrite(command):
    if 'tern-train' in command:
        if '--after' in command:
            command = re.sub(r'--after \S+', '--after ' + BUDGET, command)
        else:
            command += ' --after ' + BUDGET
        if '--set "' in command:
            command = command.replace('--set "', '--set "$TINY;', 1)
        else:
            command += ' --set "$TINY"'
        return [command]
    if 'tern-serve' in command:
        command = command.rstrip('&').rstrip()
        return [command + ' --listen 127.0.0.1:0 > "$WORK/serve.out" 2> "$WORK/serve.log" &',
                'SERVE_PID=$!', 'wait_ready']
    if command.startswith('curl '):
        if '127.0.0.1:8080' not in command:
            sys.exit('documented_commands: a curl not to 127.0.0.1:8080: ' + command)
        command = command.replace('127.0.0.1:8080', '127.0.0.1:$PORT')
        return [command + ' | tee -a "$WORK/curl.out" | grep -q \'"translations"\'']
    return [command]


def main():
    root = sys.argv[1]
    blocks = [('README.md', 'A model from training to translation, by hand'),
              ('docs/serving.md', '`tern-serve` serves exported models')]
    print('set -euo pipefail')
    for page, marker in blocks:
        print('echo "== %s"' % page)
        for command in block_after('%s/%s' % (root, page), marker):
            for line in rewrite(command):
                print(line)
        print('stop_server')


if __name__ == '__main__':
    main()
