"""The release gate: the Counselor drafts, the Supervisor reviews that exact version, only the gate delivers."""
