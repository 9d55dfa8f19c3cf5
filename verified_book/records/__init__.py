"""What a run keeps: the results file per machine, its typed record, the machine's identity, the conditions a
measurement was taken in."""
