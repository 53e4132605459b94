"""add the memory's fill progress to repositories: the version that embeds, how many of how many issues

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-08 23:00:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('memory_version', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('memory_embedded', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('memory_of', sa.Integer(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.drop_column('memory_of')
        batch_op.drop_column('memory_embedded')
        batch_op.drop_column('memory_version')
