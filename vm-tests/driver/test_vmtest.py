"""Unit tests of the driver's own logic (no VM): python3 -m unittest, run by
make vm-lint."""

import os
import tempfile
import unittest

import vmtest


class FakeMachine:
    """A node as collect_journals sees it: a name, a connection, execute."""

    def __init__(self, name, answers, connected=True):
        self.name = name
        self.conn = object() if connected else None
        self.answers = answers  # command -> output, or an exception to raise
        self.commands = []

    def execute(self, command, timeout=None):
        self.commands.append(command)
        answer = self.answers[command]
        if isinstance(answer, Exception):
            raise answer
        return 0, answer


class CollectJournalsTest(unittest.TestCase):
    def collect(self, machines):
        run_dir = tempfile.mkdtemp()
        driver = object.__new__(vmtest.Driver)  # no VMs, no bridge
        driver.run_dir, driver.machines = run_dir, machines
        driver.collect_journals()
        return run_dir

    def read(self, run_dir, name):
        with open(os.path.join(run_dir, name)) as f:
            return f.read()

    def test_journal_then_goroutines_of_each_running_vm(self):
        cp1 = FakeMachine("cp1", {vmtest.JOURNAL_TAIL: "journal of cp1", vmtest.GOROUTINES: "goroutine 1 [IO wait]"})
        gone = FakeMachine("cp2", {}, connected=False)
        run_dir = self.collect([cp1, gone])
        self.assertEqual(self.read(run_dir, "cp1.journal.log"), "journal of cp1")
        self.assertEqual(self.read(run_dir, "cp1.goroutines.log"), "goroutine 1 [IO wait]")
        # The dump ends the daemon: the journal is read before it.
        self.assertEqual(cp1.commands, [vmtest.JOURNAL_TAIL, vmtest.GOROUTINES])
        self.assertFalse(os.path.exists(os.path.join(run_dir, "cp2.journal.log")))

    def test_a_broken_vm_is_named_not_raised(self):
        cp1 = FakeMachine("cp1", {vmtest.JOURNAL_TAIL: TimeoutError("no answer"), vmtest.GOROUTINES: "stacks"})
        run_dir = self.collect([cp1])
        self.assertEqual(self.read(run_dir, "cp1.journal.log"), "journal unavailable: no answer")
        self.assertEqual(self.read(run_dir, "cp1.goroutines.log"), "stacks")

    def test_goroutines_come_from_a_quit_daemon(self):
        # The command itself: SIGQUIT to the unit, its journal since then.
        self.assertIn("systemctl kill -s QUIT vipproxy.service", vmtest.GOROUTINES)
        self.assertIn("journalctl -u vipproxy.service --since @$since", vmtest.GOROUTINES)


if __name__ == "__main__":
    unittest.main()
