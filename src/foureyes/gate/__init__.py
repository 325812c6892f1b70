"""The release gate: the Counselor drafts, the Supervisor reviews it, only the gate delivers."""
