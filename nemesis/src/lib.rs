//! Faults and their schedules (see the nemesis issue).
