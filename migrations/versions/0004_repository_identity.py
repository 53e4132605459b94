"""repositories keyed by GitHub's id and marked private; per-issue event time; suspended installations

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-01 09:50:00

Existing repositories are marked private (their visibility is unknown until the next delivery says it),
so no text already stored reaches another installation's models.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('installations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suspended_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('github_id', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('private', sa.Boolean(), nullable=False, server_default=sa.true()))
        batch_op.create_unique_constraint(batch_op.f('uq_repositories_github_id'), ['github_id'])
    with op.batch_alter_table('issues', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_event_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('issues', schema=None) as batch_op:
        batch_op.drop_column('last_event_at')
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_repositories_github_id'), type_='unique')
        batch_op.drop_column('private')
        batch_op.drop_column('github_id')
    with op.batch_alter_table('installations', schema=None) as batch_op:
        batch_op.drop_column('suspended_at')
