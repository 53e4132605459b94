"""add memory_entries: each repository's confirmed issues, embedded by the serving model

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 09:50:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('memory_entries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repository_id', sa.Integer(), nullable=False),
    sa.Column('issue_id', sa.Integer(), nullable=False),
    sa.Column('model_version', sa.String(length=64), nullable=False),
    sa.Column('label', sa.String(length=255), nullable=False),
    sa.Column('embedding', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['issue_id'], ['issues.id'], name=op.f('fk_memory_entries_issue_id_issues')),
    sa.ForeignKeyConstraint(['repository_id'], ['repositories.id'],
                            name=op.f('fk_memory_entries_repository_id_repositories')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memory_entries')),
    sa.UniqueConstraint('issue_id', 'model_version', name=op.f('uq_memory_entries_issue_id'))
    )
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_memory_entries_issue_id'), ['issue_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_memory_entries_repository_id'), ['repository_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_memory_entries_repository_id'))
        batch_op.drop_index(batch_op.f('ix_memory_entries_issue_id'))
    op.drop_table('memory_entries')
