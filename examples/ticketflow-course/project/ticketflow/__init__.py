"""ticketflow: tickets, tenants, and an audit trail fed by Kafka (the course's sample system)."""
